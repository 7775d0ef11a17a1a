"""The week plan's solver, pure: the LP's spill, its hysteresis, headroom that expires
first, the demand profile, and the entry a turn reads (``routing/plan_ahead``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routing.plan_ahead.inputs import (
    HOURS_OF_WEEK,
    AgentDemand,
    PlanState,
    WeekInputs,
    WindowState,
    capacity_estimate,
    demand_profile,
    hour_of_week,
    nominal_capacity,
    window_state,
)
from routing.plan_ahead.solve import plan_week
from routing.plan_ahead.week_plan import KEY, STALE_AFTER, WeekPlan

NOW = datetime(2030, 1, 9, 10, 0, tzinfo=UTC)  # a Wednesday
PRICES = {"opus": 25.0, "sonnet": 5.0, "haiku": 5.0 / 3, None: 5.0}
DAY = timedelta(days=1)


def plan(
    pk: int, *, weekly_left: float, weekly_reset: timedelta, weekly: float = 20e6
) -> PlanState:
    five = WindowState("five_hour", 2e6, 2e6, NOW + timedelta(hours=2), timedelta(hours=5))
    week = WindowState("seven_day", weekly, weekly_left, NOW + weekly_reset, timedelta(days=7))
    return PlanState(pk, f"plan-{pk}", (five, week))


def agent(pk: int, family: str, per_hour: float, assigned: int | None) -> AgentDemand:
    return AgentDemand(pk, f"agent-{pk}", family, assigned, (per_hour,) * HOURS_OF_WEEK)


def test_ample_plans_move_nobody_and_spill_nothing() -> None:
    plans = (
        plan(1, weekly_left=20e6, weekly_reset=3 * DAY),
        plan(2, weekly_left=20e6, weekly_reset=5 * DAY),
    )
    agents = (agent(1, "opus", 20_000, 1), agent(2, "haiku", 20_000, 2))
    week = plan_week(WeekInputs(NOW, plans, agents, PRICES))

    assert week.status == "optimal" and week.key_usd == pytest.approx(0, abs=1e-6)
    assert {p.agent_id: p.subscription_id for p in week.placements} == {1: 1, 2: 2}
    assert week.spill == ()


def test_a_short_week_spills_the_cheapest_family_to_the_key() -> None:
    # One plan with 10 Mtok left this week, 2 Mtok per 5 hours; demand ~34 Mtok a week.
    plans = (plan(1, weekly_left=10e6, weekly_reset=6 * DAY),)
    agents = (agent(1, "opus", 50_000, 1), agent(2, "haiku", 150_000, 1))
    week = plan_week(WeekInputs(NOW, plans, agents, PRICES))

    assert week.spill and {s.family for s in week.spill} == {"haiku"}
    assert week.key_usd > 0
    # The opus agent keeps its plan; the key takes haiku turns only.
    assert all(p.kind != KEY for p in week.placements if p.agent_id == 1)


def test_the_key_is_planned_as_late_as_the_week_allows() -> None:
    # Enough for the next days, short over the week: nothing spills in the first day.
    plans = (plan(1, weekly_left=15e6, weekly_reset=6 * DAY),)
    agents = (agent(1, "haiku", 60_000, 1), agent(2, "opus", 60_000, 1))
    week = plan_week(WeekInputs(NOW, plans, agents, PRICES))

    assert week.spill, "the week is short"
    assert min(s.since for s in week.spill) > NOW + DAY
    assert all(p.kind != KEY for p in week.placements)


def test_headroom_that_expires_soon_takes_the_agent_while_the_week_is_short() -> None:
    # Plan 2 resets in 6 hours with its week nearly unused; plan 1 is the agent's and
    # short for the week: the plan uses plan 2's headroom before it is lost.
    plans = (
        plan(1, weekly_left=4e6, weekly_reset=6 * DAY),
        plan(2, weekly_left=18e6, weekly_reset=timedelta(hours=6)),
    )
    agents = (agent(1, "opus", 150_000, 1),)
    week = plan_week(WeekInputs(NOW, plans, agents, PRICES))

    entry = week.entry(1)
    assert entry is not None and entry.subscription_id == 2
    assert "before it resets" in entry.because


def test_an_agent_without_a_forecast_gets_no_entry() -> None:
    plans = (plan(1, weekly_left=20e6, weekly_reset=3 * DAY),)
    quiet = AgentDemand(1, "quiet", "opus", 1, (0.0,) * HOURS_OF_WEEK)
    week = plan_week(WeekInputs(NOW, plans, (quiet,), PRICES))

    assert week.entry(1) is None


def test_the_plan_round_trips_through_json_and_goes_stale() -> None:
    plans = (plan(1, weekly_left=10e6, weekly_reset=6 * DAY),)
    agents = (agent(1, "opus", 100_000, 1), agent(2, "haiku", 100_000, 1))
    week = plan_week(WeekInputs(NOW, plans, agents, PRICES))

    again = WeekPlan.from_json(week.to_json())
    entry = again.entry(1)
    assert entry is not None and entry == week.entry(1)
    assert entry.current(NOW + STALE_AFTER) and not entry.current(
        NOW + STALE_AFTER + timedelta(seconds=1)
    )
    assert entry.text().startswith("planned for plan-1 until ")


def test_the_demand_profile_is_each_hours_decayed_mean_and_fills_unseen_hours() -> None:
    start = NOW - timedelta(weeks=2)
    # Two weeks of one turn every Wednesday 10:xx: 1,000 tokens a week ago, 3,000 before.
    turns = [
        (NOW - timedelta(weeks=1) + timedelta(minutes=5), 1_000.0),
        (start + timedelta(minutes=5), 3_000.0),
    ]
    profile = demand_profile(turns, now=NOW, since=start)

    wednesday_ten = hour_of_week(NOW)
    # The last week weighs 1, the one before DECAY (0.5).
    assert profile[wednesday_ten] == pytest.approx((1_000 * 1 + 3_000 * 0.5) / (1 + 0.5))
    assert profile[wednesday_ten + 1] == 0.0  # covered and quiet
    fresh = demand_profile(
        [(NOW - timedelta(hours=2), 500.0)], now=NOW, since=NOW - timedelta(hours=3)
    )
    assert fresh[hour_of_week(NOW - DAY)] == pytest.approx(500 / 3)  # unseen: the mean rate


def test_a_window_reads_left_from_its_utilization_and_rolls_a_past_reset() -> None:
    capacity = nominal_capacity("max-5x", "seven_day")
    assert capacity == 5e6
    now_state = window_state(
        "seven_day", utilization=40.0, resets_at=NOW + DAY, capacity=capacity, now=NOW
    )
    assert now_state is not None and now_state.left == pytest.approx(3e6)
    rolled = window_state(
        "five_hour", utilization=90.0, resets_at=NOW - timedelta(hours=1), capacity=1e6, now=NOW
    )
    assert (
        rolled is not None and rolled.left == 1e6 and rolled.resets_at == NOW + timedelta(hours=4)
    )
    assert capacity_estimate(2e6, 40.0, nominal=1.0) == pytest.approx(5e6)
    assert capacity_estimate(2e6, 1.0, nominal=7.0) == 7.0  # too little used to learn from
