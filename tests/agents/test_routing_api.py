"""The agent's routing fields over REST: policy, wait policy, max wait, key budgets."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, RoutingPolicy
from tests.agents.factories import AgentFactory
from trinity.models import SystemSettings
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

URL = "/api/agents"
WEEK = 7 * 24 * 3600


def test_a_new_agent_shows_its_routing_fields_with_their_defaults(
    owner_client: APIClient,
) -> None:
    response = owner_client.post(URL, {"name": "bot"}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["routing_policy"] == "thrifty"
    assert data["wait_policy"] == "wait"
    assert data["max_wait_seconds"] == 6 * 3600
    assert data["key_budget_daily_usd"] is None
    assert data["key_budget_monthly_usd"] is None


def test_a_new_agent_without_a_policy_gets_the_system_default(owner_client: APIClient) -> None:
    system_settings_get()
    SystemSettings.objects.update(default_routing_policy=RoutingPolicy.SUBSCRIPTION_ONLY)
    response = owner_client.post(URL, {"name": "bot"}, format="json")
    assert response.json()["routing_policy"] == "subscription-only"
    given = owner_client.post(URL, {"name": "bot2", "routing_policy": "pinned"}, format="json")
    assert given.json()["routing_policy"] == "pinned"


def test_every_routing_field_is_set_on_create_and_budgets_come_back_as_strings(
    owner_client: APIClient,
) -> None:
    body = {
        "name": "bot",
        "routing_policy": "subscription-only",
        "wait_policy": "fail",
        "max_wait_seconds": WEEK,
        "key_budget_daily_usd": "2.50",
        "key_budget_monthly_usd": "40",
    }
    response = owner_client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["wait_policy"] == "fail"
    assert data["max_wait_seconds"] == WEEK
    assert data["key_budget_daily_usd"] == "2.50"
    assert data["key_budget_monthly_usd"] == "40.00"
    agent = Agent.objects.get(name="bot")
    assert agent.key_budget_monthly_usd == Decimal("40.00")
    assert agent.routing_policy == RoutingPolicy.SUBSCRIPTION_ONLY


@pytest.mark.parametrize("value", [40, 2.5])
def test_a_budget_sent_as_a_number_is_a_400_naming_the_field(
    owner_client: APIClient, value: float
) -> None:
    # Dollars are decimal strings in the schema; a JSON number (a float, once parsed)
    # is refused rather than rounded into a budget.
    response = owner_client.post(
        URL, {"name": "bot", "key_budget_monthly_usd": value}, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()) == {"key_budget_monthly_usd"}
    assert not Agent.objects.filter(name="bot").exists()


@pytest.mark.parametrize(
    ("change", "stored"),
    [
        ({"routing_policy": "pinned"}, ("routing_policy", "pinned")),
        ({"wait_policy": "fail"}, ("wait_policy", "fail")),
        ({"max_wait_seconds": 0}, ("max_wait_seconds", 0)),
        ({"max_wait_seconds": WEEK}, ("max_wait_seconds", WEEK)),
        ({"key_budget_daily_usd": "0"}, ("key_budget_daily_usd", Decimal("0"))),
        ({"key_budget_daily_usd": None}, ("key_budget_daily_usd", None)),
        (
            {"key_budget_monthly_usd": "9999999999.99"},
            ("key_budget_monthly_usd", Decimal("9999999999.99")),
        ),
    ],
)
def test_the_owner_changes_one_routing_field_at_a_time(
    owner_client: APIClient, owner: object, change: dict[str, object], stored: tuple[str, object]
) -> None:
    agent = AgentFactory.create(name="bot", owner=owner, key_budget_daily_usd=Decimal("5"))
    response = owner_client.patch(f"{URL}/bot", change, format="json")
    assert response.status_code == 200, response.content
    agent.refresh_from_db()
    field, value = stored
    assert getattr(agent, field) == value


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"routing_policy": "cheapest"}, "routing_policy"),
        ({"wait_policy": "sometimes"}, "wait_policy"),
        ({"max_wait_seconds": -1}, "max_wait_seconds"),
        ({"max_wait_seconds": WEEK + 1}, "max_wait_seconds"),
        ({"max_wait_seconds": "an hour"}, "max_wait_seconds"),
        ({"key_budget_daily_usd": "-0.01"}, "key_budget_daily_usd"),
        ({"key_budget_daily_usd": "1.001"}, "key_budget_daily_usd"),
        ({"key_budget_monthly_usd": "NaN"}, "key_budget_monthly_usd"),
        ({"key_budget_monthly_usd": "1e20"}, "key_budget_monthly_usd"),
    ],
)
def test_a_bad_routing_value_is_400_by_field_and_changes_nothing(
    owner_client: APIClient, owner: object, change: dict[str, object], field: str
) -> None:
    agent = AgentFactory.create(name="bot", owner=owner)
    before = Agent.objects.filter(pk=agent.pk).values().get()
    response = owner_client.patch(f"{URL}/bot", change, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert Agent.objects.filter(pk=agent.pk).values().get() == before


def test_another_user_cannot_change_an_agents_routing(
    other_client: APIClient, admin_client_api: APIClient, owner: object
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    assert (
        other_client.patch(f"{URL}/bot", {"wait_policy": "fail"}, format="json").status_code == 404
    )
    assert Agent.objects.get(name="bot").wait_policy == "wait"
    response = admin_client_api.patch(f"{URL}/bot", {"wait_policy": "fail"}, format="json")
    assert response.status_code == 200
    assert Agent.objects.get(name="bot").wait_policy == "fail"


@pytest.mark.parametrize(
    ("change", "reapplied"),
    [
        ({"routing_policy": "subscription-only"}, True),  # what it boots with may change
        ({"wait_policy": "fail"}, False),
        ({"key_budget_daily_usd": "3"}, False),
    ],
)
def test_a_policy_change_reapplies_the_agents_credentials_once_committed(
    owner_client: APIClient,
    owner: object,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    change: dict[str, object],
    reapplied: bool,
) -> None:
    from agents import tasks

    agent = AgentFactory.create(name="bot", owner=owner)
    sent: list[int] = []
    monkeypatch.setattr(tasks.apply_credentials, "delay", sent.append)
    monkeypatch.setattr(tasks.restart, "delay", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.patch(f"{URL}/bot", change, format="json")
    assert response.status_code == 200, response.content
    assert sent == ([agent.pk] if reapplied else [])
