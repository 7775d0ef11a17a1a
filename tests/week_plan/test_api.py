"""What the operator sees of the week plan: GET /api/week-plan, each agent's
``planned`` in the Agents API, and the routing explainer's line."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from agents.week_plan_store import week_plan_store
from execution.explain.explanation import routing_explain
from execution.explain.text import explanation_text
from tests.agents.factories import AgentFactory
from tests.headroom.readings import T0
from tests.subscriptions.factories import SubscriptionFactory
from tests.week_plan.factories import planned, week_plan

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(owner: User, other_user: User) -> dict[str, Any]:
    plan = SubscriptionFactory.create(name="max-b")
    mine = AgentFactory.create(name="mine", owner=owner, subscription=plan)
    theirs = AgentFactory.create(name="theirs", owner=other_user)
    week_plan_store(
        week_plan(
            planned(mine.pk, subscription_id=plan.pk, name="max-b", until=timedelta(hours=45)),
            planned(theirs.pk, subscription_id=None, name=""),
            reserves={plan.pk: 25.0},
        )
    )
    return {"plan": plan, "mine": mine, "theirs": theirs}


def test_an_operator_sees_the_plan_with_only_their_own_agents(
    at_t0: object, fleet: dict[str, Any], owner_client: APIClient
) -> None:
    body = owner_client.get("/api/week-plan").json()

    assert body["made_at"] == "2030-01-01T12:00:00Z"
    assert body["stale"] is False
    assert body["status"] == "optimal"
    assert body["key_usd"] == 37.5
    assert [p["agent"] for p in body["placements"]] == ["mine"]
    mine = body["placements"][0]
    assert mine["where"] == "max-b" and mine["kind"] == "plan" and mine["current"] is True
    assert mine["until"] == "2030-01-03T09:00:00Z"
    assert mine["text"] == (
        "planned for max-b until Thu 09:00 UTC, because its weekly window resets first"
    )
    assert body["reserves"] == [
        {"subscription_id": fleet["plan"].pk, "name": "max-b", "percent": 25.0}
    ]
    assert body["spill"][0]["family"] == "opus"


def test_an_admin_sees_every_agent(
    at_t0: object, fleet: dict[str, Any], admin_client_api: APIClient
) -> None:
    body = admin_client_api.get("/api/week-plan").json()

    assert sorted(p["agent"] for p in body["placements"]) == ["mine", "theirs"]
    key = next(p for p in body["placements"] if p["agent"] == "theirs")
    assert key["where"] == "the platform key" and key["kind"] == "key"


def test_someone_signed_out_sees_nothing(fleet: dict[str, Any], anon_client: APIClient) -> None:
    assert anon_client.get("/api/week-plan").status_code in (401, 403)


def test_an_old_plan_is_stale_and_no_plan_says_so(
    at_t0: Any, fleet: dict[str, Any], other_client: APIClient
) -> None:
    at_t0.move_to(T0 + timedelta(minutes=31))
    assert other_client.get("/api/week-plan").json()["stale"] is True

    cache.clear()
    body = other_client.get("/api/week-plan").json()
    assert body["made_at"] is None and body["stale"] is True and body["placements"] == []


def test_each_agent_lists_its_current_entry_with_one_cache_read(
    at_t0: object, fleet: dict[str, Any], admin_client_api: APIClient, monkeypatch: Any
) -> None:
    single: list[str] = []
    real_get = cache.get

    def counted_get(key: str, *args: Any, **kwargs: Any) -> Any:
        single.append(key)
        return real_get(key, *args, **kwargs)

    monkeypatch.setattr(cache, "get", counted_get)

    agents = {a["name"]: a for a in admin_client_api.get("/api/agents").json()}

    assert not [k for k in single if k.startswith("week-plan")]
    assert agents["mine"]["planned"] == {
        "kind": "plan",
        "subscription_id": fleet["plan"].pk,
        "where": "max-b",
        "until": "2030-01-03T09:00:00Z",
        "because": "its weekly window resets first",
        "made_at": "2030-01-01T12:00:00Z",
        "text": "planned for max-b until Thu 09:00 UTC, because its weekly window resets first",
    }
    assert agents["theirs"]["planned"]["where"] == "the platform key"


def test_a_stale_entry_is_no_entry(
    at_t0: Any, fleet: dict[str, Any], owner_client: APIClient
) -> None:
    at_t0.move_to(T0 + timedelta(minutes=31))

    assert owner_client.get("/api/agents").json()[0]["planned"] is None
    assert owner_client.get("/api/agents/mine").json()["planned"] is None


def test_the_explainer_says_the_agents_planned_line(at_t0: object, fleet: dict[str, Any]) -> None:
    explanation = routing_explain(agent=fleet["mine"], now=T0)

    line = "planned for max-b until Thu 09:00 UTC, because its weekly window resets first"
    assert explanation.planned == line
    assert f"Week plan: {line}" in explanation_text(explanation)
    assert routing_explain(agent=fleet["mine"], now=T0 + timedelta(minutes=31)).planned is None
