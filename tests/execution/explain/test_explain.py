"""The routing explainer: where the next turn would run and why, from the turn's own
code, reading only the database and the cache. Real Postgres and Redis."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents.models import Agent
from execution.explain.explanation import Explanation, routing_explain
from execution.explain.text import explanation_text
from routing.eligibility import Reason
from routing.headroom.exhaustion_forecast import (
    Forecast,
    WindowForecast,
    forecast_key,
    forecast_to_json,
)
from routing.headroom.reading import Reading
from simulator.control import SimulatorControl
from subscriptions import breaker, leases
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_write
from subscriptions.key_rung_state import KeyClosed, key_rung_state
from subscriptions.models import FailureKind, Subscription
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from tests.execution.support import register_plan
from tests.headroom.readings import T0, limited, reading, window
from tests.subscriptions.factories import SubscriptionFactory, refuse
from trinity import clock
from trinity import services as trinity_services
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db
MINUTE = timedelta(minutes=1)
KEY = "sk-ant-api03-" + "k" * 40


def _key_refused(*, ago: timedelta, kind: str) -> None:
    record_rate_limit_event(
        agent_name="x",
        credential_kind="api_key",
        subscription_id=None,
        error_message="refused",
        failure_kind=kind,
        now=T0 - ago,
    )


def _agent_on(subscription: Subscription | None, **fields: Any) -> Agent:
    agent = AgentFactory.create(name="bot", **fields)
    if subscription is not None:
        agent = subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)
    return Agent.objects.select_related("subscription").get(pk=agent.pk)


def _explain(agent: Agent, *, autonomous: bool = False) -> Explanation:
    return routing_explain(agent=agent, now=T0, autonomous=autonomous)


def _order(explanation: Explanation) -> list[tuple[str, str]]:
    return [(r.name, r.why) for r in explanation.rungs]


def _pool(**readings: Reading | None) -> dict[str, Subscription]:
    """Subscriptions named by the keywords (in that order), with those readings cached."""
    subs = {name: SubscriptionFactory.create(name=name) for name in readings}
    snapshots_write({subs[n].pk: r for n, r in readings.items() if r is not None})
    return subs


@pytest.fixture
def key() -> None:
    trinity_services.platform_api_key_set(key=KEY)


@pytest.fixture
def banded() -> None:
    """Rank by band whatever the system default is (these tests read bands)."""
    trinity_services.system_routing_settings_set(changes={"routing_strategy": "banded"})


class TestKeyRungState:
    """The key rung's gates, each named (the turn asks ``key_rung_available``)."""

    def _state(self, agent: Agent) -> KeyClosed | None:
        return key_rung_state(agent=agent, system=system_settings_get(), now=T0).closed

    def test_each_gate_names_itself(self, key: None) -> None:
        agent = AgentFactory.create()
        assert self._state(agent) is None
        agent.use_platform_api_key = False
        assert self._state(agent) is KeyClosed.AGENT_OPTED_OUT
        agent.use_platform_api_key = True
        agent.routing_policy = "subscription-only"
        assert self._state(agent) is KeyClosed.POLICY
        agent.routing_policy = "thrifty"
        trinity_services.system_setting_set(name="subscription_api_key_fallback", value=False)
        assert self._state(agent) is KeyClosed.FALLBACK_OFF

    def test_no_key_names_itself(self) -> None:
        assert self._state(AgentFactory.create()) is KeyClosed.NO_KEY

    @pytest.mark.parametrize(
        ("kind", "ago", "closed"),
        [
            (FailureKind.RATE_LIMIT, 5 * MINUTE - timedelta(seconds=1), True),
            (FailureKind.RATE_LIMIT, 5 * MINUTE, False),
            (FailureKind.AUTH, 119 * MINUTE, True),
            (FailureKind.AUTH, 120 * MINUTE, False),
        ],
    )
    def test_a_recent_refusal_names_itself_with_its_instant(
        self, key: None, kind: str, ago: timedelta, closed: bool
    ) -> None:
        _key_refused(ago=ago, kind=kind)
        state = key_rung_state(agent=AgentFactory.create(), system=system_settings_get(), now=T0)
        assert (state.closed is KeyClosed.REFUSED_RECENTLY) is closed
        assert state.refused_at == (T0 - ago if closed else None)


class TestWhereTheNextTurnRuns:
    def test_a_serving_assignment_runs_first_then_the_ranked_order_then_the_key(
        self, key: None, banded: None
    ) -> None:
        subs = _pool(
            mine=reading(seven_day=20.0),
            fuller=reading(five_hour=5.0, seven_day=75.0),
            emptier=reading(five_hour=5.0, seven_day=12.0),
            unread=None,
        )
        agent = _agent_on(subs["mine"])

        e = _explain(agent)

        assert e.assigned is not None and e.assigned.refusing is False
        assert (e.pre_dispatch, e.assigned.decided_by) == ("serving", "reading")
        assert e.first is not None and (e.first.name, e.first.why) == ("mine", "assigned")
        assert _order(e) == [
            ("mine", "assigned"),
            ("emptier", "ranked"),
            ("fuller", "ranked"),
            ("unread", "ranked"),
            ("platform API key", "api_key"),
        ]
        emptier, fuller, unread = e.rungs[1].figures, e.rungs[2].figures, e.rungs[3].figures
        assert (emptier.tier, emptier.band, emptier.limiting_window) == ("measured", 1, "seven_day")
        assert (fuller.band, fuller.fullness) == (7, 75.0)
        assert unread.tier == "unknown" and unread.limiting_window is None
        assert e.walk_stop == "exhausted" and e.excluded == [] and e.key.available

    def test_a_fresh_refusing_reading_routes_the_first_attempt_to_the_best_alternative(
        self,
    ) -> None:
        subs = _pool(mine=limited(now=T0, resets_in=40 * MINUTE), other=reading(), third=reading())
        agent = _agent_on(subs["mine"])

        e = _explain(agent)

        assert e.assigned is not None and e.assigned.refusing
        assert (e.pre_dispatch, e.assigned.decided_by) == ("routed", "reading")
        assert e.assigned.figures.limiting_window == "five_hour"
        assert e.assigned.figures.resets_at == T0 + 40 * MINUTE
        assert e.first is not None and (e.first.name, e.first.why) == ("other", "pre_dispatch")
        # The assignment is never tried again once routed around: the ranking leaves it out.
        assert _order(e) == [("other", "pre_dispatch"), ("third", "ranked")]
        assert e.key.closed == KeyClosed.NO_KEY
        assert e.walk_stop == "exhausted"

    def test_a_refusal_in_the_skip_window_decides_without_a_reading(self, key: None) -> None:
        subs = _pool(mine=None, other=None)
        agent = _agent_on(subs["mine"])
        refuse(subs["mine"], ago=10 * MINUTE, resets_in=30 * MINUTE)

        e = _explain(agent)

        assert e.assigned is not None
        assert (e.assigned.refusing, e.assigned.decided_by) == (True, "refusal")
        assert e.assigned.last_refusal_at == T0 - 10 * MINUTE
        assert e.assigned.last_refusal_resets_at == T0 + 30 * MINUTE
        assert e.first is not None and e.first.name == "other"

    def test_with_nothing_better_known_it_runs_as_assigned(self) -> None:
        subs = _pool(mine=limited(now=T0), other=limited(now=T0))
        agent = _agent_on(subs["mine"])

        e = _explain(agent)

        assert e.pre_dispatch == "no_alternative"
        assert e.first is not None and e.first.name == "mine"
        assert [(x.name, x.reason) for x in e.excluded] == [("other", Reason.REFUSING)]
        assert e.excluded[0].figures.limiting_window == "five_hour"
        assert e.excluded[0].figures.resets_at == T0 + timedelta(hours=1)

    def test_a_pinned_agent_runs_as_assigned_and_never_walks(self, key: None) -> None:
        subs = _pool(mine=limited(now=T0), other=reading())
        agent = _agent_on(subs["mine"], routing_policy="pinned")

        e = _explain(agent)

        assert (e.pre_dispatch, e.walk_stop) == ("pinned", "pinned")
        assert _order(e) == [("mine", "assigned")]
        assert e.excluded == []

    def test_with_auto_switch_off_a_refusal_fails_the_turn(self) -> None:
        subs = _pool(mine=reading(), other=reading())
        agent = _agent_on(subs["mine"])
        trinity_services.system_setting_set(name="auto_switch_subscriptions", value=False)

        e = _explain(agent)

        assert (e.pre_dispatch, e.walk_stop) == ("serving", "auto_switch_off")
        assert _order(e) == [("mine", "assigned")]

    def test_an_agent_without_a_subscription_runs_on_the_key_or_nothing(self, key: None) -> None:
        _pool(other=reading())
        agent = _agent_on(None)

        e = _explain(agent)

        assert e.assigned is None and (e.pre_dispatch, e.walk_stop) == (
            "no_assignment",
            "no_subscription",
        )
        assert _order(e) == [("platform API key", "assigned")]
        agent.use_platform_api_key = False
        assert _explain(agent).first is None


class TestSkipListed:
    def test_an_interactive_turn_takes_a_skip_listed_plan_as_its_last_resort(
        self, key: None
    ) -> None:
        subs = _pool(mine=None, good=reading(), refused=None)
        agent = _agent_on(subs["mine"])
        refuse(subs["refused"], ago=10 * MINUTE, resets_in=50 * MINUTE)

        e = _explain(agent)

        assert _order(e) == [
            ("mine", "assigned"),
            ("good", "ranked"),
            ("refused", "last_resort"),
            ("platform API key", "api_key"),
        ]
        assert e.rungs[2].last_refusal_at == T0 - 10 * MINUTE
        assert e.rungs[2].last_refusal_resets_at == T0 + 50 * MINUTE

    @pytest.mark.parametrize(("ago", "taken"), [(29 * MINUTE, False), (30 * MINUTE, True)])
    def test_an_autonomous_turn_takes_it_only_30_minutes_after_its_refusal(
        self, ago: timedelta, taken: bool
    ) -> None:
        subs = _pool(mine=None, refused=None)
        agent = _agent_on(subs["mine"])
        refuse(subs["refused"], ago=ago)

        e = _explain(agent, autonomous=True)

        assert (
            ("refused", "last_resort") in _order(e)
            if taken
            else _order(e) == [("mine", "assigned")]
        )
        excluded = [(x.name, x.reason) for x in e.excluded]
        assert excluded == ([] if taken else [("refused", Reason.SKIP_LISTED)])
        if not taken:
            assert "an autonomous turn waits 30 minutes after a refusal" in e.excluded[0].detail

    def test_a_refusal_whose_reset_has_passed_readmits_it_in_rank(self) -> None:
        subs = _pool(mine=None, back=None)
        agent = _agent_on(subs["mine"])
        refuse(subs["back"], ago=40 * MINUTE, resets_in=-10 * MINUTE)

        assert _order(_explain(agent)) == [("mine", "assigned"), ("back", "readmitted")]


class TestKeyRungLine:
    def test_a_recent_key_refusal_says_when_the_rung_reopens(self, key: None) -> None:
        agent = _agent_on(_pool(mine=reading())["mine"])
        _key_refused(ago=2 * MINUTE, kind=FailureKind.RATE_LIMIT)

        e = _explain(agent)

        assert e.key.closed == KeyClosed.REFUSED_RECENTLY
        assert e.key.reopens_at == T0 + 3 * MINUTE
        assert ("platform API key", "api_key") not in _order(e)


class TestPolicy:
    def test_subscription_only_on_an_overage_plan_starts_on_a_plan_its_policy_allows(
        self, key: None
    ) -> None:
        mine = SubscriptionFactory.create(
            name="mine", plan_type="enterprise", overage="bill_overage"
        )
        SubscriptionFactory.create(name="metered", plan_type="enterprise", overage="bill_overage")
        SubscriptionFactory.create(name="hard-stop")
        agent = _agent_on(mine, routing_policy="subscription-only")

        e = _explain(agent)

        assert e.assigned is not None and "subscription-only" in e.assigned.policy_refusal
        assert e.pre_dispatch == "policy"
        assert _order(e) == [("hard-stop", "policy")]  # never the key
        assert [(x.name, x.reason) for x in e.excluded] == [("metered", Reason.POLICY)]
        assert e.key.closed == KeyClosed.POLICY

    def test_subscription_only_with_no_plan_it_allows_is_refused_before_any_attempt(
        self, key: None
    ) -> None:
        mine = SubscriptionFactory.create(
            name="mine", plan_type="enterprise", overage="bill_overage"
        )
        agent = _agent_on(mine, routing_policy="subscription-only")

        e = _explain(agent)

        assert (e.first, e.rungs, e.walk_stop) == (None, [], "policy")


class TestFamilyBlocks:
    def _sonnet_refusal(self, subscription: Subscription) -> None:
        record_rate_limit_event(
            agent_name="x",
            subscription_id=subscription.pk,
            error_message="429",
            failure_kind=FailureKind.RATE_LIMIT,
            limiting_window="seven_day_sonnet",
            resets_at=T0 + timedelta(days=2),
            now=T0 - 10 * MINUTE,
        )

    def test_a_sonnet_weekly_refusal_keeps_out_only_sonnet_turns(self) -> None:
        subs = _pool(mine=None, b=None)
        self._sonnet_refusal(subs["b"])
        opus = _agent_on(subs["mine"], model="claude-opus-4-1")
        assert _order(_explain(opus)) == [("mine", "assigned"), ("b", "ranked")]

        # A turn's own model decides, over the agent's.
        opus.model = "claude-sonnet-4-5"
        on_opus = routing_explain(agent=opus, now=T0, model="claude-opus-4-1")
        assert (on_opus.model, on_opus.family) == ("claude-opus-4-1", "seven_day_opus")
        assert ("b", "ranked") in _order(on_opus)
        e = _explain(opus)
        assert _order(e) == [("mine", "assigned"), ("b", "last_resort")]
        assert e.rungs[1].last_refusal_window == "seven_day_sonnet"
        autonomous = _explain(opus, autonomous=True)
        assert [(x.name, x.reason) for x in autonomous.excluded] == [("b", Reason.FAMILY_BLOCKED)]

    def test_a_reading_whose_family_window_is_blocked_drops_it_for_that_family(self) -> None:
        blocked = window(100.0, resets_in=timedelta(days=2), status="rejected")
        subs = _pool(mine=None, b=reading(extra={"seven_day_sonnet": blocked}))
        agent = _agent_on(subs["mine"], model="claude-sonnet-4-5")

        e = _explain(agent)

        assert [(x.name, x.reason) for x in e.excluded] == [("b", Reason.FAMILY_BLOCKED)]
        assert e.excluded[0].figures.limiting_window == "seven_day_sonnet"
        agent.model = "claude-opus-4-1"
        assert ("b", "ranked") in _order(_explain(agent))


class TestCapsAndBreaker:
    def _hold(self, subscription: Subscription, cap: int = 1) -> None:
        Subscription.objects.filter(pk=subscription.pk).update(max_concurrency=cap)
        assert leases.lease_acquire(
            subscription_id=subscription.pk,
            holder="another-turn",
            cap=cap,
            expires_at=T0 + 10 * MINUTE,
            now=T0,
        )

    def test_a_plan_at_its_cap_is_left_out_and_an_assignment_at_its_cap_is_routed_around(
        self,
    ) -> None:
        subs = _pool(mine=None, busy=None, free=None)
        agent = _agent_on(subs["mine"])
        self._hold(subs["busy"])

        e = _explain(agent)
        assert _order(e) == [("mine", "assigned"), ("free", "ranked")]
        assert [(x.name, x.reason) for x in e.excluded] == [("busy", Reason.AT_CAPACITY)]

        self._hold(subs["mine"])
        e = _explain(agent)
        assert e.assigned is not None and e.assigned.at_capacity
        assert (e.pre_dispatch, _order(e)[0]) == ("at_capacity", ("free", "at_capacity"))

    def test_an_open_breaker_fails_the_turn_before_any_attempt(self, settings: Any) -> None:
        settings.TRINITY_BREAKER_OPEN_FAILURES = 2
        settings.TRINITY_BREAKER_DEGRADED_FAILURES = 1
        subs = _pool(mine=reading(), other=reading())
        agent = _agent_on(subs["mine"])
        for credential in ("subscription:1", "subscription:2"):
            breaker.breaker_failure_record(provider="anthropic", credential=credential, now=T0)

        e = _explain(agent)

        assert (e.breaker, e.pre_dispatch, e.walk_stop) == (
            "open",
            "provider_outage",
            "provider_outage",
        )
        assert (e.first, e.rungs) == (None, [])
        # After the cooldown one trial turn is sent: the explainer names where.
        later = routing_explain(agent=agent, now=T0 + timedelta(seconds=31))
        assert later.breaker == "half_open" and later.first is not None
        assert later.first.name == "mine"
        assert "Provider breaker: half-open (one trial turn at a time is sent)" in (
            explanation_text(later)
        )


class TestForecastAndBalanced:
    def _running_out(self, subscription: Subscription, *, in_: timedelta) -> None:
        forecast = Forecast(
            computed_at=T0 - MINUTE,
            windows={"five_hour": WindowForecast(T0 + in_, 30.0, T0 + timedelta(hours=3))},
        )
        cache.set(forecast_key(subscription.pk), forecast_to_json(forecast), timeout=600)

    def test_a_plan_forecast_to_run_out_mid_turn_starts_the_turn_on_another_plan(
        self, key: None
    ) -> None:
        subs = _pool(mine=reading(), other=reading())
        agent = _agent_on(subs["mine"])
        self._running_out(subs["mine"], in_=2 * MINUTE)

        e = _explain(agent)

        assert e.assigned is not None and e.assigned.forecast_exhausted
        assert e.assigned.figures.runs_out_at == T0 + 2 * MINUTE
        assert (e.pre_dispatch, _order(e)[0]) == ("forecast", ("other", "pre_dispatch"))

    def test_with_only_the_key_left_a_forecast_keeps_the_turn_on_its_plan(self, key: None) -> None:
        subs = _pool(mine=reading())
        agent = _agent_on(subs["mine"])
        self._running_out(subs["mine"], in_=2 * MINUTE)

        e = _explain(agent)

        assert (e.pre_dispatch, _order(e)[0]) == ("no_alternative", ("mine", "assigned"))

    def test_the_balanced_strategy_shows_each_plans_score_and_its_tightest_window(self) -> None:
        trinity_services.system_routing_settings_set(changes={"routing_strategy": "balanced"})
        subs = _pool(
            mine=None,
            # 60% left of a weekly resetting in 3 days vs 80% left resetting in 7 days.
            soon=reading(five_hour=5.0, seven_day=40.0, seven_day_resets_in=timedelta(days=3)),
            late=reading(five_hour=5.0, seven_day=20.0, seven_day_resets_in=timedelta(days=7)),
        )
        agent = _agent_on(subs["mine"])

        e = _explain(agent)

        assert e.strategy == "balanced"
        assert _order(e)[1:] == [("soon", "ranked"), ("late", "ranked")]
        soon = e.rungs[1].figures
        assert soon.limiting_window == "seven_day"
        assert soon.score == pytest.approx(60.0 / (3 / 7))


UNREACHABLE_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:9/0",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
    }
}


def test_with_the_cache_down_it_says_the_turn_runs_as_assigned_in_database_order() -> None:
    subs = _pool(mine=None, b=None, a=None)
    agent = _agent_on(subs["mine"])
    refuse(subs["mine"], ago=MINUTE)  # only the cache's mark would say so

    with override_settings(CACHES=UNREACHABLE_REDIS):
        e = _explain(agent)

    assert e.assigned is not None and e.assigned.decided_by == "unreachable"
    assert (e.pre_dispatch, e.ranking_fallback, e.breaker) == (
        "serving",
        "store_unreachable",
        "closed",
    )
    assert _order(e) == [("mine", "assigned"), ("a", "ranked"), ("b", "ranked")]


class TestKeyBudget:
    def test_a_budget_hit_exactly_closes_the_key_rung_with_its_reason(self, key: None) -> None:
        agent = _agent_on(_pool(mine=reading())["mine"], key_budget_daily_usd=Decimal("0.00"))

        e = _explain(agent)

        assert (e.key.available, e.key.closed) == (False, KeyClosed.BUDGET)
        assert "daily budget" in e.key.detail
        assert e.key.reopens_at is not None and e.key.reopens_at > T0


# The API and the command


URL = "/api/agents/bot/routing"


@pytest.fixture
def now() -> datetime:
    """A fixed instant near the real one: the test client's session must not expire."""
    return clock.now().replace(microsecond=0)


@pytest.fixture
def owned(owner: User, key: None, banded: None, now: datetime) -> Agent:
    subs = _pool(mine=reading(now=now), other=reading(now=now, seven_day=50.0))
    agent = AgentFactory.create(name="bot", owner=owner)
    return subscription_services.assignment_set(agent=agent, subscription_id=subs["mine"].pk)


class TestApi:
    @pytest.mark.parametrize(
        ("client_name", "status"),
        [("owner_client", 200), ("other_client", 404), ("admin_client_api", 200)],
    )
    def test_the_owner_and_an_admin_see_it_and_anyone_else_gets_a_404(
        self,
        request: pytest.FixtureRequest,
        owned: Agent,
        now: datetime,
        client_name: str,
        status: int,
    ) -> None:
        client: APIClient = request.getfixturevalue(client_name)
        with time_machine.travel(now, tick=False):
            response = client.get(URL)
        assert response.status_code == status, response.content
        if status == 200:
            body = response.json()
            assert body["first"]["name"] == "mine" and body["pre_dispatch"] == "serving"
            assert [r["name"] for r in body["rungs"]] == ["mine", "other", "platform API key"]
            assert body["at"] == now.isoformat()
            assert any(line.startswith("Next turn runs on: mine") for line in body["summary"])

    def test_it_explains_a_turn_on_another_model_or_an_autonomous_one(
        self, owner_client: APIClient, owned: Agent
    ) -> None:
        body = owner_client.get(URL, {"model": "claude-opus-4-1", "autonomous": "true"}).json()
        assert (body["model"], body["family"], body["autonomous"]) == (
            "claude-opus-4-1",
            "seven_day_opus",
            True,
        )
        assert owner_client.get(URL, {"autonomous": "maybe"}).status_code == 400

    def test_an_unknown_agent_is_a_404(self, owner_client: APIClient, owned: Agent) -> None:
        assert owner_client.get("/api/agents/nobody/routing").status_code == 404

    def test_anonymous_is_refused(self, anon_client: APIClient, owned: Agent) -> None:
        assert anon_client.get(URL).status_code in (401, 403)

    def test_it_writes_nothing_and_never_asks_the_provider(
        self, control: SimulatorControl, owner: User, owner_client: APIClient
    ) -> None:
        a, _ = register_plan(control, "plan-a")
        b, _ = register_plan(control, "plan-b")
        c, _ = register_plan(control, "plan-c")
        agent = AgentFactory.create(name="bot", owner=owner)
        subscription_services.assignment_set(agent=agent, subscription_id=a.pk)
        now = clock.now()
        snapshots_write({a.pk: limited(now=now)})  # routed around: every path runs
        record_rate_limit_event(
            agent_name="x",
            subscription_id=c.pk,
            error_message="429",
            failure_kind=FailureKind.RATE_LIMIT,
            now=now - MINUTE,
        )
        system_settings_get()
        control.clear_requests()
        keys_before = sorted(cache.keys("*"))  # type: ignore[attr-defined]
        values_before = cache.get_many(keys_before)

        with CaptureQueriesContext(connection) as queries:
            response = owner_client.get(URL)

        assert response.status_code == 200, response.content
        assert response.json()["first"]["name"] == "plan-b"
        writes = [
            q["sql"]
            for q in queries.captured_queries
            if q["sql"].lstrip().split(" ", 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}
        ]
        # The session middleware may touch its own row; the explainer writes nothing.
        assert [w for w in writes if "django_session" not in w] == []
        assert sorted(cache.keys("*")) == keys_before  # type: ignore[attr-defined]
        assert cache.get_many(keys_before) == values_before
        assert control.requests() == []  # no probe, no turn: the upstream saw nothing


class TestCommand:
    def test_it_prints_where_the_next_turn_runs_and_why(self, owned: Agent, now: datetime) -> None:
        out = StringIO()
        with time_machine.travel(now, tick=False):
            call_command("routing_explain", "bot", stdout=out)
        text = out.getvalue()
        assert "Next turn runs on: mine (assigned)" in text
        assert "  2. other [ranked]: tier measured, band 5, 50% used, limited by seven_day" in text
        assert "  3. platform API key [the key rung]" in text
        assert "Key rung: available" in text

    def test_json_is_the_api_explanation(
        self, owned: Agent, owner_client: APIClient, now: datetime
    ) -> None:
        out = StringIO()
        with time_machine.travel(now, tick=False):
            call_command("routing_explain", "bot", "--json", stdout=out)
            body = owner_client.get(URL).json()
        body.pop("summary")
        assert json.loads(out.getvalue()) == body

    def test_an_unknown_agent_is_an_error(self, owned: Agent) -> None:
        with pytest.raises(CommandError, match="No agent named 'nobody'"):
            call_command("routing_explain", "nobody")
