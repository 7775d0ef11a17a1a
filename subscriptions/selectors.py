from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Prefetch, Q, QuerySet

from agents.models import Agent
from subscriptions.models import FailureKind, RateLimitEvent, Subscription
from trinity.errors import NotFound


def skip_window_start(now: datetime) -> datetime:
    """Refusals after this instant count against a subscription (default: 2h back)."""
    return now - timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)


def is_subscription_rate_limited(*, subscription_id: int, now: datetime) -> bool:
    """The display question: a rate_limit refusal within the window (default 2h).

    An event exactly one window old has aged out.
    """
    return RateLimitEvent.objects.filter(
        subscription_id=subscription_id,
        failure_kind=FailureKind.RATE_LIMIT,
        occurred_at__gt=skip_window_start(now),
    ).exists()


def has_recent_subscription_failures(*, subscription_id: int, now: datetime) -> bool:
    """The candidate-skip question: a refusal of any kind (NULL legacy rows too) in the window."""
    return RateLimitEvent.objects.filter(
        subscription_id=subscription_id, occurred_at__gt=skip_window_start(now)
    ).exists()


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_staff", False))


def subscriptions_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Subscription]:
    """Every subscription of the pool, with the agents on it and their count: all of
    them for an admin, only the viewer's own for anyone else.

    The pool is admin-managed and shared by every agent of the installation (any
    plan may serve any agent's turn: the walk, the explainer and a turn's "served
    by" name them), so every signed-in user sees each subscription's name, plan and
    headroom, never its token; what they must not see is other owners' agents or
    counts derived from them.
    """
    # Each agent with its owner: names are unique per owner only, and an admin sees
    # two owners' "bot" on one plan as two agents (the panel addresses each by both).
    listed = Agent.objects.select_related("owner").only(
        "id", "name", "subscription_id", "owner__username"
    )
    if is_admin(user):
        return Subscription.objects.annotate(
            agent_count=Count("agents", distinct=True)
        ).prefetch_related(Prefetch("agents", queryset=listed))
    own = Q(agents__owner_id=user.pk)
    return Subscription.objects.annotate(
        agent_count=Count("agents", filter=own, distinct=True)
    ).prefetch_related(Prefetch("agents", queryset=listed.filter(owner_id=user.pk)))


def subscription_get_visible(*, user: AbstractBaseUser | AnonymousUser, pk: int) -> Subscription:
    """The subscription ``pk`` if ``user`` may read it (``subscriptions_visible_to``).

    Raises NotFound, with the same message whether the id is hidden from the user or
    does not exist, so neither a read nor an assignment reveals which ids exist.
    """
    subscription = subscriptions_visible_to(user).filter(pk=pk).first()
    if subscription is None:
        raise NotFound(f"No subscription with id {pk}.")
    return subscription


def subscription_count(provider: str) -> int:
    """How many plans of ``provider`` the pool holds (one count query)."""
    return Subscription.objects.filter(provider=provider).count()
