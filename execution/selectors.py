from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from agents.models import Agent
from execution.models import Execution
from trinity.errors import NotFound
from trinity.models import Notification


def executions_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Execution]:
    """Admins see every turn; others the turns of agents they own."""
    queryset = Execution.objects.select_related("served_by_subscription")
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(agent__owner_id=user.pk)


def execution_get_visible(*, user: AbstractBaseUser | AnonymousUser, pk: str) -> Execution:
    execution = executions_visible_to(user).filter(pk=pk).first()
    if execution is None:
        raise NotFound(f"No execution {pk}.")
    return execution


def notifications_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Notification]:
    """Admins see every notification; others those about their agents or the
    subscriptions their agents use."""
    queryset = Notification.objects.all()
    if getattr(user, "is_staff", False):
        return queryset
    own = Agent.objects.filter(owner_id=user.pk)
    return queryset.filter(
        Q(agent_name__in=own.values("name"))
        | Q(subscription_id__in=own.exclude(subscription=None).values("subscription_id"))
    )
