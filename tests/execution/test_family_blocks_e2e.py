"""Per-model-family blocks end to end: the REST API, real agent servers running the
real Claude Code CLI, the provider simulator (which keeps per-family weekly windows),
the real sampler probe, Postgres and Redis. What ran where is read from the
simulator's request log."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions.headroom.sampler import headroom_refresh
from subscriptions.models import FailureKind, RateLimitEvent
from tests.agents.factories import AgentFactory
from tests.execution.support import register_plan
from trinity import clock

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SONNET_MODEL = "claude-sonnet-4-5"
OPUS_MODEL = "claude-opus-4-5"


def turn(client: APIClient, agent: str, **body: object) -> dict[str, Any]:
    response = client.post(
        f"/api/agents/{agent}/task", {"message": "say hi", **body}, format="json"
    )
    data: dict[str, Any] = response.json()
    data["http_status"] = response.status_code
    return data


def sent(control: SimulatorControl) -> list[tuple[str | None, str | None, int]]:
    """(credential, model, status) of every turn's Messages request, in order."""
    return [
        (r["credential"], r["model"], r["status"])
        for r in control.requests()
        if r["path"] == "/v1/messages" and r["stream"]
    ]


def test_a_sonnet_weekly_block_leaves_an_opus_turn_on_the_plan_while_a_sonnet_turn_walks(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, b_token = register_plan(control, "plan-b")
    # plan-a's weekly window started an hour before its Sonnet window, so the two
    # resets differ and a refusal's reset names one of them. plan-b is as used, so
    # placement has no better plan to move the Opus turn to.
    control.set_usage(a_token, "seven_day", percent=30)
    control.set_usage(b_token, "seven_day", percent=30)
    control.advance_clock(3600)
    control.set_usage(a_token, "seven_day_sonnet", percent=50)
    control.set_usage(b_token, "seven_day_sonnet", percent=50)
    reading = headroom_refresh(subscription=a, now=clock.now())  # the sampler's real probe
    headroom_refresh(subscription=b, now=clock.now())
    assert reading.windows["seven_day_sonnet"].status == "allowed"
    # Then the Sonnet weekly runs out (the cached reading does not know yet).
    control.set_usage(a_token, "seven_day_sonnet", percent=100)

    for name in ("other", "bot"):
        agent = AgentFactory.create(name=name, owner=owner, model=SONNET_MODEL)
        Agent.objects.filter(pk=agent.pk).update(subscription=a)

    # Another agent's Sonnet turn is refused on plan-a by the Sonnet weekly and walks.
    first = turn(owner_client, "other")
    assert first["http_status"] == 200, first
    assert sent(control) == [("plan-a", SONNET_MODEL, 429), ("plan-b", SONNET_MODEL, 200)]
    event = RateLimitEvent.objects.get(subscription=a)
    # The CLI printed only the reset; the cached reading's Sonnet window has it.
    assert (event.failure_kind, event.limiting_window) == (
        FailureKind.RATE_LIMIT,
        "seven_day_sonnet",
    )
    sonnet_reset = reading.windows["seven_day_sonnet"].resets_at
    assert event.resets_at is not None and sonnet_reset is not None
    assert abs((event.resets_at - sonnet_reset).total_seconds()) <= 60

    # An Opus turn of an agent on plan-a still runs there: the block is not its family's.
    control.clear_requests()
    opus = turn(owner_client, "bot", model=OPUS_MODEL)
    assert opus["http_status"] == 200, opus
    assert sent(control) == [("plan-a", OPUS_MODEL, 200)]
    assert opus["served_by_subscription"] is None or opus["served_by_subscription"]["id"] == a.pk
    assert [x["name"] for x in opus["attempts"]] == ["plan-a"]

    # The same agent's Sonnet turn goes elsewhere before its first attempt.
    control.clear_requests()
    sonnet = turn(owner_client, "bot")
    assert sonnet["http_status"] == 200, sonnet
    assert sent(control) == [("plan-b", SONNET_MODEL, 200)]
    assert [(x["name"], x["why"]) for x in sonnet["attempts"]] == [("plan-b", "pre_dispatch")]
    assert RateLimitEvent.objects.count() == 1  # routing around it recorded nothing new
    assert b.pk == sonnet["served_by_subscription"]["id"]
