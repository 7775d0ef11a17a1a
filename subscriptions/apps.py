from __future__ import annotations

from django.apps import AppConfig


class SubscriptionsConfig(AppConfig):
    name = "subscriptions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from agents.models import Agent
        from agents.signals import agent_created
        from subscriptions.metrics import SubscriptionWindowsCollector
        from subscriptions.models import Subscription
        from subscriptions.receivers import auto_assign_new_agent
        from subscriptions.week_plan import service as week_plan
        from trinity.metrics import state_collector_register

        agent_created.connect(auto_assign_new_agent, dispatch_uid="subscriptions-auto-assign")
        state_collector_register(SubscriptionWindowsCollector())
        # What the week plan is made from changed: plan again (debounced).
        post_save.connect(week_plan.subscription_saved, sender=Subscription, dispatch_uid="wp-sub")
        post_save.connect(week_plan.agent_saved, sender=Agent, dispatch_uid="wp-agent")
        post_delete.connect(week_plan.row_deleted, sender=Subscription, dispatch_uid="wp-sub-del")
        post_delete.connect(week_plan.row_deleted, sender=Agent, dispatch_uid="wp-agent-del")
