from __future__ import annotations

import secrets
from datetime import timedelta

import factory
from django.utils import timezone

from subscriptions.models import FailureKind, RateLimitEvent, Subscription
from subscriptions.services import record_rate_limit_event
from tests.headroom.readings import T0
from trinity.crypto import Secret


def plan_token() -> str:
    return "sk-ant-oat01-" + secrets.token_urlsafe(40)


class SubscriptionFactory(factory.django.DjangoModelFactory[Subscription]):
    class Meta:
        model = Subscription

    name = factory.Sequence(lambda n: f"plan-{n}")
    provider = "anthropic"
    plan_type = "max-20x"
    token = factory.LazyFunction(lambda: Secret(plan_token()))
    token_fingerprint = factory.LazyAttribute(lambda o: o.token.fingerprint)


class RateLimitEventFactory(factory.django.DjangoModelFactory[RateLimitEvent]):
    class Meta:
        model = RateLimitEvent

    agent_name = "agent-x"
    subscription = factory.SubFactory(SubscriptionFactory)
    error_message = "429 usage limit"
    failure_kind = FailureKind.RATE_LIMIT
    occurred_at = factory.LazyFunction(timezone.now)


def refuse(
    subscription: Subscription,
    *,
    ago: timedelta,
    resets_in: timedelta | None = None,
    kind: str = FailureKind.RATE_LIMIT,
) -> None:
    """A refusal of ``subscription`` ``ago`` before ``T0``, recorded as a turn records
    one (the event and its cache mark), by another agent; ``resets_in``: the reset it
    named, from ``T0``."""
    record_rate_limit_event(
        agent_name="elsewhere",
        subscription_id=subscription.pk,
        error_message="429",
        failure_kind=kind,
        resets_at=T0 + resets_in if resets_in is not None else None,
        now=T0 - ago,
    )
