"""The fleet's routing settings over REST: default policy, strategy, key budgets."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

URL = "/api/subscriptions/settings/routing"


def test_defaults_are_thrifty_balanced_and_no_budget(owner_client: APIClient) -> None:
    response = owner_client.get(URL)
    assert response.status_code == 200
    assert response.json() == {
        "default_routing_policy": "thrifty",
        "routing_strategy": "balanced",
        "key_budget_daily_usd": None,
        "key_budget_monthly_usd": None,
    }


def test_an_admin_changes_only_the_fields_sent(admin_client_api: APIClient) -> None:
    response = admin_client_api.put(
        URL, {"routing_strategy": "banded", "key_budget_daily_usd": "12.5"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {
        "default_routing_policy": "thrifty",
        "routing_strategy": "banded",
        "key_budget_daily_usd": "12.50",
        "key_budget_monthly_usd": None,
    }
    row = system_settings_get()
    assert row.key_budget_daily_usd == Decimal("12.50")
    admin_client_api.put(
        URL,
        {"default_routing_policy": "subscription-only", "key_budget_daily_usd": None},
        format="json",
    )
    row.refresh_from_db()
    assert row.default_routing_policy == "subscription-only"
    assert row.key_budget_daily_usd is None
    assert row.routing_strategy == "banded"


def test_non_admins_read_the_routing_settings_but_cannot_change_them(
    owner_client: APIClient, other_client: APIClient
) -> None:
    for client in (owner_client, other_client):
        assert client.get(URL).status_code == 200
        response = client.put(URL, {"routing_strategy": "banded"}, format="json")
        assert response.status_code == 403
    assert system_settings_get().routing_strategy == "balanced"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"default_routing_policy": "generous"}, "default_routing_policy"),
        ({"routing_strategy": "random"}, "routing_strategy"),
        ({"key_budget_daily_usd": "-1"}, "key_budget_daily_usd"),
        ({"key_budget_monthly_usd": "abc"}, "key_budget_monthly_usd"),
        ({"key_budget_monthly_usd": "0.001"}, "key_budget_monthly_usd"),
    ],
)
def test_a_bad_routing_setting_is_400_by_field_and_writes_nothing(
    admin_client_api: APIClient, body: dict[str, object], field: str
) -> None:
    response = admin_client_api.put(URL, {"routing_strategy": "banded", **body}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert system_settings_get().routing_strategy == "balanced"
