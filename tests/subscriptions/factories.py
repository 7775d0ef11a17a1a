from __future__ import annotations

import secrets

import factory
from django.utils import timezone

from subscriptions.models import FailureKind, RateLimitEvent, Subscription
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
