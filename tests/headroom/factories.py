from __future__ import annotations

import secrets
from typing import Any

import factory
from django.utils import timezone

from simulator.control import RequestRecord, SimulatorControl
from subscriptions.models import HeadroomSample, Subscription
from tests.subscriptions.factories import SubscriptionFactory
from trinity.crypto import Secret


def codex_token() -> str:
    return "eyJhbGciOiJIUzI1NiJ9." + secrets.token_urlsafe(24) + "." + secrets.token_urlsafe(16)


def plan_on(sim: SimulatorControl, *, provider: str = "anthropic", **usage: float) -> Subscription:
    """A subscription whose token the simulator knows (labelled with its name), with
    ``usage`` as window name → percent."""
    extra: dict[str, Any] = {}
    if provider == "openai-codex":
        token = codex_token()
        extra = {"provider": provider, "plan_type": "plus", "token": Secret(token)}
    subscription = SubscriptionFactory.create(**extra)
    assert subscription.token is not None
    token = subscription.token.reveal()
    if provider == "openai-codex":
        sim.register(token, kind="codex", label=subscription.name)
    else:
        sim.register(token, kind="oauth", label=subscription.name)
    for window, percent in usage.items():
        sim.set_usage(token, window, percent=percent)  # type: ignore[arg-type]
    return subscription


class HeadroomSampleFactory(factory.django.DjangoModelFactory[HeadroomSample]):
    class Meta:
        model = HeadroomSample

    subscription = factory.SubFactory(SubscriptionFactory)
    fetched_at = factory.LazyFunction(timezone.now)
    status = "ok"
    source = "usage"
    five_hour = 10.0
    seven_day = 20.0


def served(sim: SimulatorControl) -> list[RequestRecord]:
    """The simulator's request log, without auto-registered credentials.

    A probe that an earlier test abandoned at its timeout still lands in the log
    when the simulator finishes it; by then the reset has forgotten its credential,
    so it appears under an auto-registered one (label ``…`` + last 4). Every
    credential a test registers here carries a name.
    """
    return [r for r in sim.requests() if not str(r["credential"]).startswith("…")]
