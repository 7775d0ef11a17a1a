"""The notifications a user may read, and marking them read (the inbox's two questions).

Visibility follows the agent a notice is about (by its id, never its name); the rule
needs only the notification's own columns and its agent's owner, so it lives beside
the notifications, below the apps that send them.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from trinity.models import Notification


def notifications_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Notification]:
    """Admins see every notification; others those about their own agents (by the
    agent's id, never its name: a reused name starts clean) and those about a
    subscription of the shared pool that name no agent (a headroom alert). A notice
    about another owner's agent, about an agent since deleted, or about the fleet
    (the key's fleet budget, a provider outage) is the admin's."""
    queryset = Notification.objects.all()
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(
        Q(agent__owner_id=user.pk)
        | Q(agent__isnull=True, agent_name="", subscription_id__isnull=False)
    )


def notifications_mark_read(
    *, user: AbstractBaseUser | AnonymousUser, ids: list[int] | None, now: datetime
) -> int:
    """Mark the caller's visible unread notifications read (``ids``, or all); returns how many."""
    queryset = notifications_visible_to(user).filter(read_at__isnull=True)
    if ids is not None:
        queryset = queryset.filter(pk__in=ids)
    return Notification.objects.filter(pk__in=queryset.values("pk")).update(read_at=now)
