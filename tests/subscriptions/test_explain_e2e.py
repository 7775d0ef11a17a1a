"""The explainer agrees with a real turn: ask it over REST, then run the turn through
the dispatch loop on a real agent server (the real Claude Code CLI) against the
simulator, and compare the rungs the turn tried with the ones the explainer named.
Which credential each attempt ran on is read from the simulator's request log too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.headroom.store import snapshots_write
from tests.execution.support import agent_on, messages_sent, register_plan, task
from tests.headroom.readings import limited, reading
from trinity import clock
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


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
