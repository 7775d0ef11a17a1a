"""The explainer agrees with a real turn: ask it over REST, then run the turn through
the dispatch loop on a real agent server (the real Claude Code CLI) against the
simulator, and compare the rungs the turn tried with the ones the explainer named.
Which credential each attempt ran on is read from the simulator's request log too."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent, RoutingPolicy
from simulator.control import SimulatorControl
from subscriptions import leases
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, Subscription
from tests.execution.support import agent_on, messages_sent, register_plan, task
from tests.headroom.readings import limited, reading
from tests.subscriptions.factories import plan_token
from trinity import clock
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

OPUS = "claude-opus-4-5"


def _explained(client: APIClient) -> dict[str, Any]:
    response = client.get("/api/agents/bot/routing")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _rung(entry: dict[str, Any]) -> tuple[str, int | None, str]:
    kind = entry.get("kind") or entry["credential_kind"]
    return kind, entry["subscription_id"], entry["why"]


def _key(control: SimulatorControl) -> None:
    value = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(value, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=value)


def test_the_turn_starts_on_the_serving_assignment_the_explainer_names(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, a)

    explained = _explained(owner_client)
    body = task(owner_client)

    assert (explained["first"]["name"], explained["first"]["why"]) == ("plan-a", "assigned")
    assert body["http_status"] == 200, body
    assert _rung(body["attempts"][0]) == _rung(explained["first"])
    assert messages_sent(control) == [("plan-a", 200)]


def test_a_known_refusing_assignment_is_routed_where_the_explainer_said(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    c, _ = register_plan(control, "plan-c")
    agent_on(owner, a)
    now = clock.now()
    # plan-a refuses (a fresh reading); plan-c is emptier than plan-b, so it ranks first.
    snapshots_write(
        {
            a.pk: limited(now=now),
            b.pk: reading(now=now, five_hour=5.0, seven_day=70.0),
            c.pk: reading(now=now, five_hour=5.0, seven_day=15.0),
        }
    )

    explained = _explained(owner_client)
    body = task(owner_client)

    assert explained["pre_dispatch"] == "routed"
    assert (explained["first"]["name"], explained["first"]["why"]) == ("plan-c", "pre_dispatch")
    assert body["http_status"] == 200, body
    assert _rung(body["attempts"][0]) == _rung(explained["first"])
    assert messages_sent(control) == [("plan-c", 200)]  # plan-a was never sent


def test_when_every_rung_refuses_the_turn_walks_the_order_the_explainer_gave(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, b_token = register_plan(control, "plan-b")
    c, c_token = register_plan(control, "plan-c")
    agent_on(owner, a)
    _key(control)
    now = clock.now()
    # Nothing is known to refuse, so nothing is routed around: the order is the ranking.
    snapshots_write(
        {
            a.pk: reading(now=now),
            b.pk: reading(now=now, five_hour=5.0, seven_day=65.0),
            c.pk: reading(now=now, five_hour=5.0, seven_day=25.0),
        }
    )
    for token in (a_token, b_token, c_token):
        control.set_usage(token, "five_hour", percent=100)

    explained = _explained(owner_client)
    body = task(owner_client)

    assert [(r["name"], r["why"]) for r in explained["rungs"]] == [
        ("plan-a", "assigned"),
        ("plan-c", "ranked"),
        ("plan-b", "ranked"),
        ("platform API key", "api_key"),
    ]
    assert body["http_status"] == 200, body
    assert [_rung(x) for x in body["attempts"]] == [_rung(r) for r in explained["rungs"]]
    assert messages_sent(control) == [
        ("plan-a", 429),
        ("plan-c", 429),
        ("plan-b", 429),
        ("platform-key", 200),
    ]


def test_a_subscription_only_walk_is_the_order_the_explainer_gave_and_never_the_key(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-ent")
    enterprise, _ = subscription_services.subscription_register(
        name="plan-ent", provider="anthropic", plan_type="enterprise", token=token
    )
    _, b_token = register_plan(control, "plan-b")
    _, c_token = register_plan(control, "plan-c")
    agent = agent_on(owner, enterprise)
    Agent.objects.filter(pk=agent.pk).update(routing_policy=RoutingPolicy.SUBSCRIPTION_ONLY)
    _key(control)
    control.set_usage(b_token, "five_hour", percent=100)
    control.set_usage(c_token, "five_hour", percent=100)

    explained = _explained(owner_client)
    body = task(owner_client)

    assert explained["pre_dispatch"] == "policy" and explained["walk_stop"] == "exhausted"
    assert [(r["name"], r["why"]) for r in explained["rungs"]] == [
        ("plan-b", "policy"),
        ("plan-c", "ranked"),
    ]
    assert explained["key"]["closed"] == "policy"
    assert body["http_status"] == 429, body
    assert [_rung(x) for x in body["attempts"]] == [_rung(r) for r in explained["rungs"]]
    assert messages_sent(control) == [("plan-b", 429), ("plan-c", 429)]


def test_an_assignment_at_its_cap_starts_the_turn_where_the_explainer_said(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent_on(owner, a)
    Subscription.objects.filter(pk=a.pk).update(max_concurrency=1)
    now = clock.now()
    assert leases.lease_acquire(  # another turn holds plan-a's one slot
        subscription_id=a.pk,
        holder="elsewhere",
        cap=1,
        expires_at=now + timedelta(minutes=10),
        now=now,
    )

    explained = _explained(owner_client)
    body = task(owner_client)

    assert explained["assigned"]["at_capacity"] is True
    assert (explained["first"]["name"], explained["first"]["why"]) == ("plan-b", "at_capacity")
    assert body["http_status"] == 200, body
    assert _rung(body["attempts"][0]) == _rung(explained["first"])
    assert messages_sent(control) == [("plan-b", 200)]


def test_a_sonnet_weekly_block_routes_a_sonnet_turn_and_not_an_opus_one_as_explained(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, a)  # the factory's model is a Sonnet
    control.set_usage(a_token, "seven_day_sonnet", percent=100)
    now = clock.now()
    subscription_services.record_rate_limit_event(
        agent_name="other",
        subscription_id=a.pk,
        error_message="429",
        failure_kind=FailureKind.RATE_LIMIT,
        limiting_window="seven_day_sonnet",
        resets_at=now + timedelta(days=2),
        now=now - timedelta(minutes=5),
    )

    on_sonnet = _explained(owner_client)
    on_opus = owner_client.get("/api/agents/bot/routing", {"model": OPUS}).json()
    # The Opus turn first: the Sonnet turn's switch to plan-b would move the assignment.
    opus_turn = task(owner_client, model=OPUS)
    sonnet_turn = task(owner_client)

    assert (on_sonnet["first"]["name"], on_sonnet["first"]["why"]) == ("plan-b", "pre_dispatch")
    assert on_sonnet["assigned"]["last_refusal_window"] == "seven_day_sonnet"
    assert (on_opus["first"]["name"], on_opus["first"]["why"]) == ("plan-a", "assigned")
    assert sonnet_turn["http_status"] == 200 and opus_turn["http_status"] == 200
    assert _rung(sonnet_turn["attempts"][0]) == _rung(on_sonnet["first"])
    assert _rung(opus_turn["attempts"][0]) == _rung(on_opus["first"])
