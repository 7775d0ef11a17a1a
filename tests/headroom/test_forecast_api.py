"""The exhaustion forecast over REST: per subscription and window, in the usage body
and in every row of the fleet view."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from routing.headroom.exhaustion_forecast import (
    Forecast,
    WindowForecast,
    forecast_key,
    forecast_to_json,
)
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.headroom.readings import T0, reading
from tests.subscriptions.factories import SubscriptionFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("at_t0")]
MIN = timedelta(minutes=1)


@pytest.fixture
def plan(owner: User) -> Subscription:
    subscription = SubscriptionFactory.create(name="max-a")
    AgentFactory.create(name="owned", owner=owner, subscription=subscription)
    snapshots_write({subscription.pk: reading(five_hour=80.0)})
    return subscription


def store(
    subscription: Subscription, *, computed_ago: timedelta = MIN, **windows: WindowForecast
) -> None:
    forecast = Forecast(computed_at=T0 - computed_ago, windows=windows)
    cache.set(forecast_key(subscription.pk), forecast_to_json(forecast), timeout=3600)


def out(
    in_: timedelta, *, resets_in: timedelta = 4 * 60 * MIN, burn: float = 9.2
) -> WindowForecast:
    return WindowForecast(exhausts_at=T0 + in_, burn_per_hour=burn, resets_at=T0 + resets_in)


def test_the_usage_body_shows_when_each_window_runs_out_and_the_earliest(
    owner_client: APIClient, plan: Subscription
) -> None:
    store(plan, five_hour=out(130 * MIN), seven_day=out(90 * MIN, resets_in=3 * 24 * 60 * MIN))

    body = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()

    forecast = body["forecast"]
    assert forecast["computed_at"] == (T0 - MIN).isoformat().replace("+00:00", "Z")
    assert forecast["runs_out_at"] == (T0 + 90 * MIN).isoformat().replace("+00:00", "Z")
    assert forecast["windows"]["five_hour"] == {
        "exhausts_at": (T0 + 130 * MIN).isoformat().replace("+00:00", "Z"),
        "burn_per_hour": 9.2,
        "resets_at": (T0 + 240 * MIN).isoformat().replace("+00:00", "Z"),
    }
    assert set(forecast["windows"]) == {"five_hour", "seven_day"}


def test_without_a_stored_forecast_the_field_is_null(
    owner_client: APIClient, plan: Subscription
) -> None:
    assert owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["forecast"] is None


def test_a_forecast_with_no_window_running_out_says_so(
    owner_client: APIClient, plan: Subscription
) -> None:
    store(plan)
    forecast = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["forecast"]
    assert forecast["windows"] == {} and forecast["runs_out_at"] is None


@pytest.mark.parametrize(
    ("computed_ago", "shown"),
    [(timedelta(hours=1), True), (timedelta(hours=1, seconds=1), False)],
)
def test_a_forecast_older_than_the_readings_freshness_is_not_shown(
    owner_client: APIClient, plan: Subscription, computed_ago: timedelta, shown: bool
) -> None:
    store(plan, computed_ago=computed_ago, five_hour=out(30 * MIN))
    forecast = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["forecast"]
    assert (forecast is not None) is shown


def test_a_window_that_has_reset_since_is_dropped(
    owner_client: APIClient, plan: Subscription
) -> None:
    # Its reset is now: the quota is back, whatever the old rate said.
    store(plan, five_hour=out(-10 * MIN, resets_in=timedelta(0)), seven_day=out(60 * MIN))
    forecast = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["forecast"]
    assert set(forecast["windows"]) == {"seven_day"}
    assert forecast["runs_out_at"] == (T0 + 60 * MIN).isoformat().replace("+00:00", "Z")


def test_every_row_of_the_fleet_view_carries_its_own_forecast(
    admin_client_api: APIClient, plan: Subscription
) -> None:
    idle = SubscriptionFactory.create(name="max-b")
    store(plan, five_hour=out(45 * MIN))

    body = admin_client_api.get("/api/agents/subscription-pressure").json()

    rows = {row["name"]: row for row in body["subscriptions"]}
    assert rows["max-a"]["forecast"]["windows"]["five_hour"]["burn_per_hour"] == 9.2
    assert rows[idle.name]["forecast"] is None


def test_every_operator_sees_a_pool_plans_forecast_but_not_its_agents(
    other_client: APIClient, plan: Subscription
) -> None:
    store(plan, five_hour=out(45 * MIN))
    usage = other_client.get(f"/api/subscriptions/{plan.pk}/usage").json()
    assert usage["forecast"]["windows"]["five_hour"]["burn_per_hour"] == 9.2
    body = other_client.get("/api/agents/subscription-pressure").json()
    assert [(row["name"], row["agents"]) for row in body["subscriptions"]] == [(plan.name, [])]
