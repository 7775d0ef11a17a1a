from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from agents.models import Agent
from trinity.errors import NotFound


def agents_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Agent]:
    """Admins see every agent; everyone else sees the agents they own."""
    queryset = Agent.objects.select_related("subscription", "owner")
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(owner_id=user.pk)


def agent_get_visible(*, user: AbstractBaseUser | AnonymousUser, name: str) -> Agent:
    """Return the agent or raise NotFound (also for agents the user may not see)."""
    # The owner row is not needed to run a turn (one join less); the name is unique,
    # so get() (no ORDER BY to compile).
    try:
        return (
            agents_visible_to(user)
            .select_related(None)
            .select_related("subscription")
            .get(name=name)
        )
    except Agent.DoesNotExist:
        raise NotFound(f"No agent named {name!r}.") from None
