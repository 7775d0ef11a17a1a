"""The headroom endpoints: owner / other user / admin, bad input, and what they show."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, HeadroomSample, Subscription
from tests.agents.factories import AgentFactory
from tests.headroom.factories import HeadroomSampleFactory, plan_on, served
from tests.headroom.readings import T0, limited, reading
from tests.headroom.test_store import UNREACHABLE_REDIS
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("at_t0")]
# The pool is shared: every signed-in user reads a plan's headroom (its owner's agents
# on it or not); what differs is whose agents, turns and refusals are counted in it.
TRIO = [("owner_client", 200), ("other_client", 200), ("admin_client_api", 200)]


@pytest.fixture
def plan(owner: User) -> Subscription:
    subscription = SubscriptionFactory.create(name="max-a")
    AgentFactory.create(name="owned", owner=owner, subscription=subscription)
    return subscription


def _client(request: pytest.FixtureRequest, name: str) -> APIClient:
    client: APIClient = request.getfixturevalue(name)
    return client


class TestUsage:
    @pytest.mark.parametrize(("client_name", "status"), TRIO)
    def test_who_may_read_a_subscriptions_usage(
        self, request: pytest.FixtureRequest, plan: Subscription, client_name: str, status: int
    ) -> None:
        response = _client(request, client_name).get(f"/api/subscriptions/{plan.pk}/usage")
        assert response.status_code == status

    def test_signed_out_is_refused(self, anon_client: APIClient, plan: Subscription) -> None:
        response = anon_client.get(f"/api/subscriptions/{plan.pk}/usage")
        assert response.status_code in (401, 403)

    def test_an_unknown_subscription_is_404(self, admin_client_api: APIClient) -> None:
        assert admin_client_api.get("/api/subscriptions/999999/usage").status_code == 404

    def test_it_shows_the_reading_its_age_refusals_by_kind_and_the_readings_verdict(
        self, owner_client: APIClient, admin_client_api: APIClient, plan: Subscription
    ) -> None:
        owned = plan.agents.get()
        RateLimitEventFactory.create(
            subscription=plan, agent=owned, occurred_at=T0 - timedelta(minutes=30)
        )
        RateLimitEventFactory.create(
            subscription=plan,
            agent=owned,
            occurred_at=T0 - timedelta(hours=5),
            failure_kind=FailureKind.AUTH,
        )
        RateLimitEventFactory.create(
            subscription=plan, agent=owned, occurred_at=T0 - timedelta(hours=25)
        )  # past 24h
        # Another owner's refusal counts for the admin, never for this owner.
        RateLimitEventFactory.create(
            subscription=plan, agent=AgentFactory.create(), occurred_at=T0 - timedelta(hours=1)
        )
        admin_view = admin_client_api.get(f"/api/subscriptions/{plan.pk}/usage").json()
        assert admin_view["failures_24h"] == {"rate_limit": 2, "auth": 1, "unknown": 0}
        snapshots_write({plan.pk: reading(five_hour=12.5, seven_day=40.0)})

        body = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()

        assert body["subscription_id"] == plan.pk
        headroom = body["headroom"]
        assert (headroom["state"], headroom["tier"], headroom["status"]) == (
            "reading",
            "measured",
            "ok",
        )
        assert headroom["age_seconds"] == 60
        assert headroom["windows"]["five_hour"]["utilization"] == 12.5
        assert headroom["windows"]["seven_day"]["status"] == "allowed"
        assert body["failures_24h"] == {"rate_limit": 1, "auth": 1, "unknown": 0}
        # A healthy reading taken after the 429 decides: not limited now.
        assert (body["rate_limited_now"], body["rate_limited_source"]) == (False, "reading")
        assert body["observed"]["five_hour"]["turns"] == 0
        assert body["observed"]["per_agent"] == []
        assert plan.token is not None and plan.token.reveal() not in str(body)

    def test_observed_usage_sums_the_turns_this_plan_served_per_window_and_agent(
        self, owner_client: APIClient, plan: Subscription
    ) -> None:
        from decimal import Decimal

        from execution.models import Execution

        agents = {
            "a": AgentFactory.create(name="a", owner=plan.agents.get().owner),
            "b": AgentFactory.create(name="b", owner=plan.agents.get().owner),
            "theirs": AgentFactory.create(name="theirs"),
        }

        def served(agent: str, age: timedelta, status: str = "succeeded") -> None:
            Execution.objects.create(
                agent=agents[agent],
                agent_name=agent,
                message="m",
                status=status,
                served_by_kind="subscription",
                served_by_subscription=plan,
                input_tokens=100,
                output_tokens=10,
                cost_usd=Decimal("0.5"),
                created_at=T0 - age,
            )

        served("a", timedelta(hours=1))
        served("b", timedelta(hours=4, minutes=59))
        served("a", timedelta(hours=5, minutes=1))  # outside the 5h span, inside 7d
        served("a", timedelta(days=8))  # outside both
        served("a", timedelta(hours=1), status="failed")  # a failed turn spent nothing here
        served("theirs", timedelta(hours=1))  # another owner's: counted for the admin only

        observed = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["observed"]

        assert {k: observed["five_hour"][k] for k in ("turns", "input_tokens", "cost_usd")} == {
            "turns": 2,
            "input_tokens": 200,
            "cost_usd": 1.0,
        }
        assert observed["seven_day"]["turns"] == 3
        per_agent = {row["name"]: row for row in observed["per_agent"]}
        assert per_agent["a"]["turns"] == 2
        assert per_agent["b"]["output_tokens"] == 10
        assert [(row["name"], row["owner"]) for row in observed["per_agent"]] == [
            ("a", per_agent["a"]["owner"]),
            ("b", per_agent["a"]["owner"]),
        ]

    def test_per_agent_usage_is_one_row_per_agent_with_its_owner(
        self,
        owner: User,
        other_user: User,
        owner_client: APIClient,
        admin_client_api: APIClient,
        plan: Subscription,
    ) -> None:
        """Two owners' "bot" on one plan are two rows for the admin (never one row of
        both owners' turns), each with its owner; the owner sees only their own."""
        from execution.models import Execution

        bots = {
            "owner": AgentFactory.create(name="bot", owner=owner, subscription=plan),
            "other": AgentFactory.create(name="bot", owner=other_user, subscription=plan),
        }
        for whose, turns in (("owner", 1), ("other", 3)):
            for _ in range(turns):
                Execution.objects.create(
                    agent=bots[whose],
                    agent_name="bot",
                    message="m",
                    status="succeeded",
                    served_by_kind="subscription",
                    served_by_subscription=plan,
                    created_at=T0 - timedelta(hours=1),
                )

        rows = admin_client_api.get(f"/api/subscriptions/{plan.pk}/usage").json()["observed"]
        assert [(r["name"], r["owner"], r["turns"]) for r in rows["per_agent"]] == [
            ("bot", "other", 3),
            ("bot", "owner", 1),
        ]
        mine = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()["observed"]
        assert [(r["name"], r["owner"], r["turns"]) for r in mine["per_agent"]] == [
            ("bot", "owner", 1)
        ]

    def test_without_a_reading_the_two_hour_events_decide(
        self, owner_client: APIClient, plan: Subscription
    ) -> None:
        RateLimitEventFactory.create(subscription=plan, occurred_at=T0 - timedelta(minutes=30))

        body = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()

        assert body["headroom"]["state"] == "no_reading"
        assert (body["rate_limited_now"], body["rate_limited_source"]) == (True, "events")

    def test_a_fresh_limited_reading_says_limited_without_any_event(
        self, owner_client: APIClient, plan: Subscription
    ) -> None:
        snapshots_write({plan.pk: limited()})
        body = owner_client.get(f"/api/subscriptions/{plan.pk}/usage").json()
        assert (body["rate_limited_now"], body["headroom"]["tier"]) == (True, "refusing")

    def test_with_the_store_down_it_says_so_and_falls_back_to_events(
        self, owner_client: APIClient, plan: Subscription
    ) -> None:
        RateLimitEventFactory.create(subscription=plan, occurred_at=T0 - timedelta(minutes=30))
        with override_settings(CACHES=UNREACHABLE_REDIS):
            response = owner_client.get(f"/api/subscriptions/{plan.pk}/usage")
        assert response.status_code == 200
        body = response.json()
        assert body["headroom"]["state"] == "unreachable"
        assert (body["rate_limited_now"], body["rate_limited_source"]) == (True, "events")


class TestRefresh:
    @pytest.fixture
    def sim_plan(self, sim: SimulatorControl, owner: User) -> Subscription:
        subscription = plan_on(sim, seven_day=33)
        AgentFactory.create(owner=owner, subscription=subscription)
        return subscription

    @pytest.mark.parametrize(("client_name", "status"), TRIO)
    def test_who_may_refresh(
        self,
        request: pytest.FixtureRequest,
        sim: SimulatorControl,
        sim_plan: Subscription,
        client_name: str,
        status: int,
    ) -> None:
        url = f"/api/subscriptions/{sim_plan.pk}/usage/refresh"
        response = _client(request, client_name).post(url)
        assert response.status_code == status
        assert len(served(sim)) == (1 if status == 200 else 0)

    def test_it_probes_now_and_shows_the_new_reading(
        self, owner_client: APIClient, sim_plan: Subscription
    ) -> None:
        response = owner_client.post(f"/api/subscriptions/{sim_plan.pk}/usage/refresh")
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["headroom"]["windows"]["seven_day"]["utilization"] == 33.0
        assert body["headroom"]["age_seconds"] == 0
        assert body["last_probe"]["status"] == "ok"

    def test_inside_the_floor_it_answers_429_with_retry_after(
        self, owner_client: APIClient, sim: SimulatorControl, sim_plan: Subscription
    ) -> None:
        url = f"/api/subscriptions/{sim_plan.pk}/usage/refresh"
        assert owner_client.post(url).status_code == 200
        with time_machine.travel(T0 + timedelta(seconds=20), tick=False):
            response = owner_client.post(url)
        assert response.status_code == 429
        assert response["Retry-After"] == "40"
        assert "at most once every 60 s" in response.json()["detail"]
        assert len(served(sim)) == 1

    def test_signed_out_is_refused(self, anon_client: APIClient, sim_plan: Subscription) -> None:
        response = anon_client.post(f"/api/subscriptions/{sim_plan.pk}/usage/refresh")
        assert response.status_code in (401, 403)

    def test_get_is_not_a_refresh(self, owner_client: APIClient, sim_plan: Subscription) -> None:
        response = owner_client.get(f"/api/subscriptions/{sim_plan.pk}/usage/refresh")
        assert response.status_code == 405


class TestHistory:
    @pytest.mark.parametrize(("client_name", "status"), TRIO)
    def test_who_may_read_history(
        self, request: pytest.FixtureRequest, plan: Subscription, client_name: str, status: int
    ) -> None:
        url = f"/api/subscriptions/{plan.pk}/headroom/history?window=7d"
        assert _client(request, client_name).get(url).status_code == status

    @pytest.mark.parametrize(
        ("window", "expected"), [("24h", [1, 2]), ("7d", [6, 1, 2]), ("30d", [29, 6, 1, 2])]
    )
    def test_each_window_returns_its_span_oldest_first(
        self, owner_client: APIClient, plan: Subscription, window: str, expected: list[int]
    ) -> None:
        # seven_day carries the sample's age in days (1 and 2 are hours-old samples).
        ages = {
            31: timedelta(days=31),
            29: timedelta(days=29),
            6: timedelta(days=6),
            1: timedelta(hours=23),
            2: timedelta(hours=1),
        }
        for label, age in ages.items():
            HeadroomSampleFactory.create(subscription=plan, fetched_at=T0 - age, seven_day=label)

        body = owner_client.get(
            f"/api/subscriptions/{plan.pk}/headroom/history?window={window}"
        ).json()

        assert body["window"] == window
        assert [s["seven_day"] for s in body["samples"]] == expected

    def test_the_window_defaults_to_a_day(
        self, owner_client: APIClient, plan: Subscription
    ) -> None:
        body = owner_client.get(f"/api/subscriptions/{plan.pk}/headroom/history").json()
        assert body["window"] == "24h"

    @pytest.mark.parametrize("window", ["1y", "24H", "7", "30 d"])
    def test_a_bad_window_is_400(
        self, owner_client: APIClient, plan: Subscription, window: str
    ) -> None:
        response = owner_client.get(
            f"/api/subscriptions/{plan.pk}/headroom/history?window={window}"
        )
        assert response.status_code == 400
        assert "window" in response.json()


class TestFleetPressure:
    URL = "/api/agents/subscription-pressure"

    @pytest.fixture
    def fleet(self, owner: User, other_user: User) -> dict[str, Any]:
        mine = SubscriptionFactory.create(name="mine")
        shared = SubscriptionFactory.create(name="shared")
        theirs = SubscriptionFactory.create(name="theirs")
        AgentFactory.create(name="owner-1", owner=owner, subscription=mine)
        AgentFactory.create(name="owner-2", owner=owner, subscription=shared)
        admin_agent_owner = AgentFactory.create(name="ops-1", subscription=shared).owner
        AgentFactory.create(name="ops-2", owner=admin_agent_owner, subscription=theirs)
        snapshots_write({mine.pk: reading(seven_day=30.0), shared.pk: limited()})
        RateLimitEventFactory.create(subscription=theirs, occurred_at=T0 - timedelta(minutes=5))
        return {"mine": mine, "shared": shared, "theirs": theirs}

    def test_the_route_is_not_taken_for_an_agent_name(
        self, admin_client_api: APIClient, fleet: dict[str, Any]
    ) -> None:
        response = admin_client_api.get(self.URL)
        assert response.status_code == 200
        assert "subscriptions" in response.json()

    def test_an_admin_sees_every_subscription_with_its_pressure(
        self, admin_client_api: APIClient, fleet: dict[str, Any]
    ) -> None:
        body = admin_client_api.get(self.URL).json()

        rows = {row["name"]: row for row in body["subscriptions"]}
        assert sorted(rows) == ["mine", "shared", "theirs"]
        assert rows["mine"]["headroom"]["tier"] == "measured"
        assert rows["shared"]["rate_limited_now"] is True
        assert [a["name"] for a in rows["shared"]["agents"]] == ["ops-1", "owner-2"]
        assert (rows["theirs"]["rate_limited_now"], rows["theirs"]["rate_limited_source"]) == (
            True,
            "events",
        )
        assert rows["theirs"]["failures_24h"] == 1
        assert body["store"] == "ok"
        assert body["summary"] == {
            "subscriptions": 3,
            "measured": 1,
            "unknown": 1,
            "refusing": 1,
            "rate_limited_now": 2,
        }

    def test_an_owner_sees_the_pool_with_only_their_own_agents_and_refusals(
        self, owner_client: APIClient, fleet: dict[str, Any]
    ) -> None:
        body = owner_client.get(self.URL).json()
        rows = {row["name"]: row for row in body["subscriptions"]}
        assert sorted(rows) == ["mine", "shared", "theirs"]
        assert [
            (n, [a["name"] for a in rows[n]["agents"]], rows[n]["agent_count"])
            for n in sorted(rows)
        ] == [
            ("mine", ["owner-1"], 1),
            ("shared", ["owner-2"], 1),
            ("theirs", [], 0),
        ]
        # Limited is the pool's state; the refusal that says so is not this owner's.
        assert (rows["theirs"]["rate_limited_now"], rows["theirs"]["failures_24h"]) == (True, 0)
        assert "ops-1" not in str(body) and "ops-2" not in str(body)

    def test_another_user_sees_the_pool_and_no_ones_agents(
        self, other_client: APIClient, fleet: dict[str, Any]
    ) -> None:
        body = other_client.get(self.URL).json()
        assert [(r["name"], r["agents"], r["agent_count"]) for r in body["subscriptions"]] == [
            ("mine", [], 0),
            ("shared", [], 0),
            ("theirs", [], 0),
        ]
        assert body["summary"]["subscriptions"] == 3

    def test_signed_out_is_refused(self, anon_client: APIClient) -> None:
        assert anon_client.get(self.URL).status_code in (401, 403)

    def test_the_query_count_does_not_grow_with_the_fleet(
        self, admin_client_api: APIClient, fleet: dict[str, Any], django_assert_max_num_queries: Any
    ) -> None:
        for n in range(10):
            sub = SubscriptionFactory.create(name=f"extra-{n}")
            AgentFactory.create(subscription=sub)
        with django_assert_max_num_queries(6):
            assert admin_client_api.get(self.URL).status_code == 200

    def test_with_the_store_down_the_fleet_view_still_answers(
        self, admin_client_api: APIClient, fleet: dict[str, Any]
    ) -> None:
        with override_settings(CACHES=UNREACHABLE_REDIS):
            body = admin_client_api.get(self.URL).json()
        assert body["store"] == "unreachable"
        assert {row["headroom"]["state"] for row in body["subscriptions"]} == {"unreachable"}


def test_history_rows_go_with_their_subscription(plan: Subscription) -> None:
    HeadroomSampleFactory.create(subscription=plan)
    plan.delete()
    assert not HeadroomSample.objects.exists()
