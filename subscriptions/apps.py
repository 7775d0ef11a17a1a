from __future__ import annotations

from django.apps import AppConfig


class SubscriptionsConfig(AppConfig):
    name = "subscriptions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.signals import agent_created
        from subscriptions.metrics import SubscriptionWindowsCollector
        from subscriptions.receivers import auto_assign_new_agent
        from trinity.metrics import state_collector_register

        agent_created.connect(auto_assign_new_agent, dispatch_uid="subscriptions-auto-assign")
        state_collector_register(SubscriptionWindowsCollector())
