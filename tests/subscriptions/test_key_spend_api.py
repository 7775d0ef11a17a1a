"""GET /api/budgets: the key's spend in the current day and month against the caps,
fleet-wide and for the agents the caller may see (owner / other user / admin)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from subscriptions.key_spend import key_spend_reserve
from subscriptions.models import KeySpend
from tests.agents.factories import AgentFactory
from trinity.selectors import system_settings_get

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@time_machine.travel(NOW, tick=False)
def test_budget_lines_show_spend_against_caps_to_whoever_may_see_the_agent(
    owner: User,
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    anon_client: APIClient,
) -> None:
    agent = AgentFactory.create(name="bot", owner=owner, key_budget_daily_usd=Decimal("1.00"))
    AgentFactory.create(name="uncapped", owner=owner)  # no cap: no lines of its own
    system = system_settings_get()
    key_spend_reserve(agent=agent, system=system, usd=Decimal("0.40"), now=NOW)
    KeySpend.objects.filter(scope=f"agent:{agent.pk}", period="day").update(
        spent_usd=Decimal("0.60"), reserved_usd=Decimal("0.40")
    )

    lines = owner_client.get("/api/budgets").json()

    assert [(x["scope"], x["period"], x["budget_usd"], x["closed"]) for x in lines] == [
        ("fleet", "day", None, False),
        ("fleet", "month", None, False),
        (f"agent:{agent.pk}", "day", "1.00", True),  # spent + reserved == budget: closed
        (f"agent:{agent.pk}", "month", None, False),
    ]
    day = lines[2]
    assert (day["agent"], day["spent_usd"], day["reserved_usd"], day["remaining_usd"]) == (
        "bot",
        "0.600000",
        "0.400000",
        "0.000000",
    )
    assert day["reopens_at"] == "2026-12-02T00:00:00Z"
    # Another user sees the fleet only; an admin sees every agent; nobody anonymous.
    assert [x["scope"] for x in other_client.get("/api/budgets").json()] == ["fleet", "fleet"]
    assert len(admin_client_api.get("/api/budgets").json()) == 4
    # The fleet's spend is every owner's key turns: an admin's figure, not an operator's.
    fleet_day = lines[0]
    assert (fleet_day["spent_usd"], fleet_day["reserved_usd"], fleet_day["remaining_usd"]) == (
        None,
        None,
        None,
    )
    admin_fleet_day = admin_client_api.get("/api/budgets").json()[0]
    assert admin_fleet_day["reserved_usd"] == "0.400000"
    assert anon_client.get("/api/budgets").status_code in (401, 403)


@time_machine.travel(NOW, tick=False)
def test_two_owners_capped_bots_are_two_lines_each_naming_its_owner(
    owner: User, other_user: User, owner_client: APIClient, admin_client_api: APIClient
) -> None:
    for user in (owner, other_user):
        AgentFactory.create(name="bot", owner=user, key_budget_daily_usd=Decimal("1.00"))

    lines = admin_client_api.get("/api/budgets").json()
    assert sorted((x["agent"], x["owner"]) for x in lines if x["period"] == "day") == [
        ("", None),  # the fleet's
        ("bot", "other"),
        ("bot", "owner"),
    ]
    mine = owner_client.get("/api/budgets").json()
    assert {(x["agent"], x["owner"]) for x in mine if x["scope"] != "fleet"} == {("bot", "owner")}
