"""Placement in the turn's order: at a turn boundary, while nothing refuses, the turn
starts on the plan whose weekly headroom expires soonest and commits the move
(``subscriptions/headroom/placement.py`` decides where; these tables pin when)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from routing.headroom.placement import DWELL
from routing.planner import (
    PLACEMENT_STAGE,
    PRE_DISPATCH_STAGE,
    Ask,
    Evidence,
    Finish,
    plan,
)
from routing.walk import Stop, Why
from tests.planner.world import ORIGIN, RATE_LIMITED, T0, World, drive, plan_rung, turn


def placing(**overrides: object) -> World:
    values: dict[str, object] = {
        "placeable": True,
        "measured": frozenset({2, 3}),
        "placement": 3,
    }
    values.update(overrides)
    return World(**values)  # type: ignore[arg-type]


def test_a_serving_assignment_whose_week_expires_later_moves_to_the_one_that_expires_sooner() -> (
    None
):
    run = drive(placing())

    assert run.sent_on == ["plan-3"]
    assert run.sends[0].why is Why.PLACEMENT and run.sends[0].routed
    assert isinstance(run.end, Finish)
    assert run.end.switch is not None and run.end.switch.commit  # the move is committed
    assert run.end.switch.reason["refused"] == "another plan's weekly headroom expires sooner"
    # Only the measured alternatives are judged, in rank order.
    placement = [n for n in run.needs if n.ask is Ask.PLACEMENT]
    assert [n.ids for n in placement] == [(2, 3)] and placement[0].stage == PLACEMENT_STAGE


def test_an_assignment_that_is_not_placeable_never_ranks_the_pool() -> None:
    run = drive(placing(placeable=False))

    assert run.sent_on == ["plan-1"] and run.sends[0].why is Why.ASSIGNED
    assert [n.ask for n in run.needs] == [Ask.BREAKER, Ask.READY, Ask.ASSIGNED, Ask.PLANNED]


def test_nowhere_better_runs_as_assigned() -> None:
    run = drive(placing(placement=None))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Finish) and run.end.switch is None


def test_only_measured_alternatives_are_asked_about() -> None:
    run = drive(placing(measured=frozenset()))

    assert run.sent_on == ["plan-1"]
    assert Ask.PLACEMENT not in [n.ask for n in run.needs]


def test_an_agent_that_moved_within_the_dwell_stays_put() -> None:
    recent = drive(placing(moved_at=T0 - DWELL + timedelta(minutes=1)))
    settled = drive(placing(moved_at=T0 - DWELL))

    assert recent.sent_on == ["plan-1"]
    assert Ask.SELECTION not in [n.ask for n in recent.needs]
    assert settled.sent_on == ["plan-3"]


def test_an_agent_that_may_not_switch_is_never_placed() -> None:
    for stop in (Stop.AUTO_SWITCH_OFF, Stop.PINNED):
        run = drive(placing(switching_stop=stop))
        assert run.sent_on == ["plan-1"], stop


def test_a_failed_read_of_the_assignment_skips_placement() -> None:
    world = placing()
    for stage in (PRE_DISPATCH_STAGE, PLACEMENT_STAGE):
        opened = Evidence(
            turn=turn(),
            admitted=True,
            ready="",
            agent=world.agent(),
            assigned=world.assigned(),
        )
        skipped = replace(opened, skipped=frozenset({stage}))
        action = plan(skipped, now=T0)
        assert getattr(action, "why", None) is Why.ASSIGNED, stage


def test_pre_dispatch_comes_first_when_the_assignment_refuses() -> None:
    run = drive(placing(refusing=True))

    assert run.sends[0].why is Why.PRE_DISPATCH  # not placement: it is known not to serve
    assert Ask.PLACEMENT not in [n.ask for n in run.needs]


def test_a_placed_turn_that_is_refused_walks_like_any_other() -> None:
    world = placing(outcomes={plan_rung(3).key: [RATE_LIMITED]})
    run = drive(world)

    assert run.sent_on == ["plan-3", "plan-2"]
    assert isinstance(run.end, Finish) and run.end.served_by == plan_rung(2)
    assert run.end.switch is not None and run.end.switch.commit
    assert ORIGIN not in [s.rung.subscription_id for s in run.sends if s.rung is not None]


# The way back: a plan the agent left within the dwell is taken only when nothing else is


def test_a_refusal_walks_past_the_plan_the_agent_just_left() -> None:
    refused = {plan_rung(ORIGIN).key: [RATE_LIMITED]}
    run = drive(World(moved_from=2, outcomes=refused))
    assert run.sent_on == ["plan-1", "plan-3"]

    only_back = drive(World(moved_from=2, ranked=(2,), outcomes=refused))
    assert only_back.sent_on == ["plan-1", "plan-2"]  # nothing else: back it goes


def test_a_forecast_never_flips_the_agent_straight_back() -> None:
    assert drive(World(forecast_out=True, moved_from=2)).sent_on == ["plan-3"]
    stays = drive(World(forecast_out=True, moved_from=2, ranked=(2,)))
    assert stays.sent_on == ["plan-1"] and stays.sends[0].why is Why.ASSIGNED
    # Known not to serve is another matter: the plan it left is where it must go.
    forced = drive(World(refusing=True, moved_from=2, ranked=(2,)))
    assert forced.sent_on == ["plan-2"] and forced.sends[0].why is Why.PRE_DISPATCH


def test_an_agent_looked_at_lately_is_not_ranked_again() -> None:
    run = drive(placing(placement_due=False))

    assert run.sent_on == ["plan-1"]
    asks = [n.ask for n in run.needs]
    assert Ask.PLACEMENT_DUE in asks and Ask.SELECTION not in asks
