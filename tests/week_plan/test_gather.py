"""Gathering the week's inputs from rows and cached readings: which plans may serve,
their windows, each agent's forecast, the key's prices, in a bounded number of queries."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import time_machine
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from routing.headroom.reading import ReadingStatus
from routing.plan_ahead.inputs import MAX_20X_TOKENS, WeekInputs, hour_of_week, nominal_capacity
from simulator.state import DEFAULT_CAPACITY
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, HeadroomSample, Subscription
from subscriptions.week_plan.gather import LIST_PRICES, model_family, week_inputs_gather
from tests.agents.factories import AgentFactory
from tests.headroom.factories import codex_token
from tests.headroom.readings import T0, reading
from tests.subscriptions.factories import SubscriptionFactory, refuse
from tests.week_plan.factories import turn
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db


def _plan(inputs: WeekInputs, name: str):
    return next(p for p in inputs.plans if p.name == name)


def _window(inputs: WeekInputs, plan: str, window: str):
    return next(w for w in _plan(inputs, plan).windows if w.name == window)


def test_max_20x_is_the_simulators_capacity_and_the_others_scale_from_it() -> None:
    assert dict(DEFAULT_CAPACITY) == MAX_20X_TOKENS
    assert nominal_capacity("max-20x", "seven_day") == 20_000_000
    assert nominal_capacity("max-5x", "five_hour") == 500_000
    assert nominal_capacity("pro", "five_hour") == 100_000
    assert nominal_capacity("team", "seven_day") == 5_000_000
    assert nominal_capacity("enterprise", "seven_day") == 20_000_000


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-opus-4-5", "opus"),
        ("claude-sonnet-4-5", "sonnet"),
        ("claude-haiku-4-5", "haiku"),
        ("gpt-5-codex", None),
        ("", None),
    ],
)
def test_a_models_family_is_routings_family_window(model: str, family: str | None) -> None:
    assert model_family(model) == family


def _sample(plan: Subscription, at: datetime, **utilization: float) -> None:
    HeadroomSample.objects.create(
        subscription=plan,
        fetched_at=at,
        status="ok",
        windows={
            name: {"utilization": value, "resets_at": None, "status": "allowed"}
            for name, value in utilization.items()
        },
    )


def test_a_read_window_learns_its_capacity_from_how_far_it_rose(at_t0: object) -> None:
    plan = SubscriptionFactory.create(name="max-a", plan_type="max-20x")
    agent = AgentFactory.create(subscription=plan)
    # The 5-hour window began 3 h ago (resets in 2 h), the weekly one 4 days ago. The
    # first sample of both periods (2 h 50 min ago) read 0 % and 10 %; since then the
    # plan served 400k and they read 40 % and 50 %: 400k is 40 points of each.
    _sample(plan, T0 - timedelta(hours=4, minutes=10), five_hour=70.0, seven_day=5.0)
    _sample(plan, T0 - timedelta(hours=2, minutes=50), five_hour=0.0, seven_day=10.0)
    _sample(plan, T0 - timedelta(hours=2), five_hour=20.0, seven_day=30.0)
    snapshots_write(
        {
            plan.pk: reading(
                five_hour=40.0,
                seven_day=50.0,
                five_hour_resets_in=timedelta(hours=2),
                seven_day_resets_in=timedelta(days=3),
            )
        }
    )
    turn(agent, at=T0 - timedelta(hours=1), tokens=400_000, served_by=plan)
    # Before the first sample of the 5-hour period: counted in neither rise.
    turn(agent, at=T0 - timedelta(hours=4), tokens=600_000, served_by=plan)

    inputs = week_inputs_gather(now=T0)["anthropic"]

    five = _window(inputs, "max-a", "five_hour")
    assert five.capacity == pytest.approx(1_000_000)
    assert five.left == pytest.approx(600_000)
    assert five.resets_at == T0 + timedelta(hours=2)
    assert five.period == timedelta(hours=5)
    # The weekly period's first sample is the one 4 h 10 min ago (5 %): both turns
    # count against a rise of 45 points.
    seven = _window(inputs, "max-a", "seven_day")
    assert seven.capacity == pytest.approx(1_000_000 * 100 / 45)
    assert seven.period == timedelta(days=7)


def test_a_window_read_below_the_learning_floor_keeps_its_nominal(at_t0: object) -> None:
    plan = SubscriptionFactory.create(name="max-a", plan_type="max-5x")
    agent = AgentFactory.create(subscription=plan)
    snapshots_write({plan.pk: reading(five_hour=2.0, seven_day=20.0)})
    turn(agent, at=T0 - timedelta(hours=1), tokens=1000, served_by=plan)

    inputs = week_inputs_gather(now=T0)["anthropic"]

    five = _window(inputs, "max-a", "five_hour")
    assert five.capacity == 500_000
    assert five.left == pytest.approx(500_000 * 0.98)


def test_a_plan_nothing_read_is_nominal_all_left_one_period_from_now(at_t0: object) -> None:
    SubscriptionFactory.create(name="pro-a", plan_type="pro")

    inputs = week_inputs_gather(now=T0)["anthropic"]

    five = _window(inputs, "pro-a", "five_hour")
    seven = _window(inputs, "pro-a", "seven_day")
    assert (five.capacity, five.left, five.resets_at) == (100_000, 100_000, T0 + timedelta(hours=5))
    assert (seven.capacity, seven.left) == (1_000_000, 1_000_000)
    assert seven.resets_at == T0 + timedelta(days=7)


def test_a_window_that_reset_since_it_was_read_starts_its_new_period_full(at_t0: object) -> None:
    plan = SubscriptionFactory.create(name="max-a", plan_type="max-20x")
    snapshots_write({plan.pk: reading(five_hour=90.0, five_hour_resets_in=timedelta(minutes=-30))})

    five = _window(week_inputs_gather(now=T0)["anthropic"], "max-a", "five_hour")

    assert five.left == five.capacity == 2_000_000
    assert five.resets_at == T0 + timedelta(hours=4, minutes=30)


def test_a_blocked_window_has_nothing_left(at_t0: object) -> None:
    plan = SubscriptionFactory.create(name="max-a")
    snapshots_write({plan.pk: reading(five_hour=80.0, five_hour_status="rejected")})

    assert _window(week_inputs_gather(now=T0)["anthropic"], "max-a", "five_hour").left == 0


def test_paused_and_refused_tokens_are_left_out_and_rate_limits_are_not(at_t0: object) -> None:
    SubscriptionFactory.create(name="serving")
    SubscriptionFactory.create(name="paused", paused_at=T0 - timedelta(hours=1))
    revoked = SubscriptionFactory.create(name="revoked")
    snapshots_write(
        {revoked.pk: reading(status=ReadingStatus.INVALID_TOKEN, five_hour=None, seven_day=None)}
    )
    refused = SubscriptionFactory.create(name="refused")
    refuse(refused, ago=timedelta(minutes=10), kind=FailureKind.AUTH)
    limited = SubscriptionFactory.create(name="limited")
    refuse(limited, ago=timedelta(minutes=10), resets_in=timedelta(hours=1))
    readmitted = SubscriptionFactory.create(name="readmitted")
    refuse(readmitted, ago=timedelta(minutes=30), kind=FailureKind.AUTH)
    snapshots_write({readmitted.pk: reading(age=timedelta(minutes=5))})  # serving since

    names = {p.name for p in week_inputs_gather(now=T0)["anthropic"].plans}

    assert names == {"serving", "limited", "readmitted"}


def test_each_provider_is_its_own_week(at_t0: object) -> None:
    SubscriptionFactory.create(name="claude")
    SubscriptionFactory.create(
        name="codex", provider="openai-codex", plan_type="pro", token=Secret(codex_token())
    )
    claude = AgentFactory.create(name="c", model="claude-opus-4-5")
    codex = AgentFactory.create(name="x", runtime="codex-cli", model="gpt-5-codex")

    weeks = week_inputs_gather(now=T0)

    assert [p.name for p in weeks["anthropic"].plans] == ["claude"]
    assert [p.name for p in weeks["openai-codex"].plans] == ["codex"]
    assert [a.id for a in weeks["anthropic"].agents] == [claude.pk]
    assert [a.id for a in weeks["openai-codex"].agents] == [codex.pk]
    assert weeks["anthropic"].agents[0].family == "opus"
    assert weeks["openai-codex"].agents[0].family is None


def test_an_agents_demand_is_its_turns_by_hour_of_week(at_t0: object) -> None:
    plan = SubscriptionFactory.create(name="max-a")
    moved = (T0 - timedelta(hours=6)).isoformat()
    agent = AgentFactory.create(subscription=plan, last_switch={"at": moved, "from": None})
    idle = AgentFactory.create()
    # Last week and the week before, both at Monday 09:xx; a turn older than 3 weeks.
    monday_9 = T0 - timedelta(days=1, hours=3)
    turn(agent, at=monday_9, tokens=10_000)
    turn(agent, at=monday_9 + timedelta(minutes=20), tokens=2_000)
    turn(agent, at=monday_9 - timedelta(weeks=1), tokens=8_000)
    turn(agent, at=T0 - timedelta(weeks=4), tokens=99_000)

    inputs = week_inputs_gather(now=T0)["anthropic"]

    demand = next(a for a in inputs.agents if a.id == agent.pk)
    assert demand.assigned == plan.pk
    assert demand.family == "sonnet"
    assert demand.moved_at == T0 - timedelta(hours=6)
    assert len(demand.hourly) == 168
    assert demand.hourly[hour_of_week(monday_9)] > 0
    assert sum(1 for v in demand.hourly if v) == 1  # one hour of the week has turns
    quiet = next(a for a in inputs.agents if a.id == idle.pk)
    assert not any(quiet.hourly) and quiet.assigned is None and quiet.moved_at is None


def test_the_keys_price_is_learned_from_what_it_charged_else_the_list(at_t0: object) -> None:
    agent = AgentFactory.create(model="claude-opus-4-5")
    turn(agent, at=T0 - timedelta(days=1), tokens=2_000_000, key=True, cost_usd="40.0")
    turn(agent, at=T0 - timedelta(days=2), tokens=2_000_000, key=True, cost_usd="20.0")

    prices = week_inputs_gather(now=T0)["anthropic"].prices

    assert prices["opus"] == pytest.approx(15.0)  # $60 for 4 Mtok
    assert prices["sonnet"] == LIST_PRICES["sonnet"]
    assert prices[None] == LIST_PRICES[None]


def _fleet(plans: int, agents: int, now: datetime) -> None:
    subs = [SubscriptionFactory.create(name=f"p{plans}-{i}") for i in range(plans)]
    snapshots_write({s.pk: reading(five_hour=30.0, seven_day=40.0, now=now) for s in subs})
    for i in range(agents):
        agent = AgentFactory.create(subscription=subs[i % plans])
        turn(agent, at=now - timedelta(hours=1 + i % 50), tokens=5000, served_by=subs[i % plans])
        turn(agent, at=now - timedelta(days=3), tokens=5000, key=True, cost_usd="0.02")


def test_the_queries_do_not_grow_with_the_fleet() -> None:
    counts = []
    for size in (2, 6):
        now = T0 + timedelta(days=size)
        with time_machine.travel(now, tick=False):
            _fleet(size, size * 4, now)
            with CaptureQueriesContext(connection) as queries:
                week_inputs_gather(now=now)
            counts.append(len(queries))
    assert counts[0] == counts[1]
    # Two providers' plans, what they served, the agents, their turns, the key's prices;
    # on the embedded default the snapshots' get_many is a query of the database cache.
    assert counts[1] == (7 if isinstance(caches["default"], DatabaseCache) else 6)
