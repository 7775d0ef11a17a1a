"""The week plan in the turn's order: a current entry answers for placement (stay,
move, or the key for a spill); no entry, a stale one, or a failed read keeps today's
rules (``routing/planner/planned.py``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from routing.headroom.placement import DWELL
from routing.plan_ahead.week_plan import KEY, PLAN, STALE_AFTER, Planned
from routing.planner import (
    KEY_RUNG,
    PLANNED_STAGE,
    Ask,
    Evidence,
    Finish,
    KeyState,
    Need,
    Notice,
    plan,
)
from routing.walk import Stop, Why
from tests.planner.world import ORIGIN, T0, World, drive, turn

UNTIL = T0 + timedelta(hours=20)


def entry(where: int | None, *, made_at=T0 - timedelta(minutes=3), until=UNTIL) -> Planned:
    kind = KEY if where is None else PLAN
    name = "platform key" if where is None else f"plan-{where}"
    return Planned(7, kind, where, name, until, "the week plan says so", made_at)


def planned(where: int | None, **overrides: object) -> World:
    values: dict[str, object] = {
        "planned": entry(where),
        "placeable": True,
        "measured": frozenset({2, 3}),
        "placement": 3,  # where today's rules would go
    }
    values.update(overrides)
    return World(**values)  # type: ignore[arg-type]


def test_an_entry_for_another_plan_moves_the_agent_there_and_commits_it() -> None:
    run = drive(planned(2))

    assert run.sent_on == ["plan-2"]
    assert run.sends[0].why is Why.PLANNED and run.sends[0].routed
    assert isinstance(run.end, Finish)
    assert run.end.switch is not None and run.end.switch.commit
    assert "planned for plan-2 until" in run.end.switch.reason["refused"]
    assert Ask.PLACEMENT not in [n.ask for n in run.needs]  # the plan, not today's rule


def test_an_entry_for_the_assignment_stays_and_asks_nothing_more() -> None:
    run = drive(planned(ORIGIN))

    assert run.sent_on == ["plan-1"] and run.sends[0].why is Why.ASSIGNED
    assert [n.ask for n in run.needs] == [Ask.BREAKER, Ask.READY, Ask.ASSIGNED, Ask.PLANNED]


def test_a_spill_entry_sends_the_turn_to_the_key_and_keeps_the_plan() -> None:
    run = drive(planned(None, outcomes={KEY_RUNG.key: []}))

    assert run.sends[0].rung is not None and run.sends[0].rung.kind is KEY_RUNG.kind
    assert run.sends[0].why is Why.SPILL
    assert isinstance(run.end, Finish)
    assert run.end.switch is not None and not run.end.switch.commit  # the agent keeps its plan
    assert run.end.notice is Notice.API_KEY_ROUTE


def test_a_spill_without_the_key_offered_runs_as_assigned() -> None:
    run = drive(planned(None, key=KeyState(False)))

    assert run.sent_on == ["plan-1"] and run.sends[0].why is Why.ASSIGNED


def test_an_agent_that_may_not_switch_never_follows_the_plan() -> None:
    for where in (2, None):
        for stop in (Stop.AUTO_SWITCH_OFF, Stop.PINNED):
            run = drive(planned(where, switching_stop=stop))
            assert run.sent_on == ["plan-1"], (where, stop)


def test_a_stale_or_ended_entry_falls_back_to_todays_rules() -> None:
    stale = drive(planned(2, planned=entry(2, made_at=T0 - STALE_AFTER - timedelta(seconds=1))))
    ended = drive(planned(2, planned=entry(2, until=T0)))
    missing = drive(planned(2, planned=None))

    for run in (stale, ended, missing):
        assert run.sent_on == ["plan-3"] and run.sends[0].why is Why.PLACEMENT


def test_a_planned_move_waits_for_the_dwell_and_the_look() -> None:
    recent = drive(planned(2, moved_at=T0 - DWELL + timedelta(minutes=1)))
    looked = drive(planned(2, placement_due=False))

    for run in (recent, looked):
        assert run.sent_on == ["plan-1"]
        assert Ask.SELECTION not in [n.ask for n in run.needs]


def test_a_planned_plan_the_ranking_does_not_offer_is_not_sent_to() -> None:
    run = drive(planned(5))

    assert run.sent_on == ["plan-1"]


def test_a_failed_read_of_the_plan_only_skips_it() -> None:
    world = planned(2)
    opened = Evidence(
        turn=turn(), admitted=True, ready="", agent=world.agent(), assigned=world.assigned()
    )
    action = plan(replace(opened, skipped=frozenset({PLANNED_STAGE})), now=T0)

    assert isinstance(action, Need) and action.ask is Ask.PLACEMENT_DUE  # today's rules
