"""The benchmark knows a pause: a trace names the spans an admin paused a plan, no
policy starts a turn on it or walks to it meanwhile (this project by ``admit``, the
baselines by the world), a turn already on it finishes there, and the bounds leave it
out for the span."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest

from bench.fleet.cells import usable
from bench.fleet.engine import simulate
from bench.fleet.lineup import POLICIES
from bench.fleet.policies import FixedPolicy, Policy
from bench.fleet.project import ProjectPolicy
from bench.fleet.trace import AgentSpec, Trace, TraceError, trace_dump, trace_parse
from bench.fleet.world import World
from tests.fleet.support import SONNET, START, fleet, plan, rungs, turn

HOUR = timedelta(hours=1)
PAUSED = (START + HOUR, START + 3 * HOUR)


def _trace() -> Trace:
    return Trace(
        fleet(plan("a", paused=(PAUSED,)), plan("b"), agents=(AgentSpec("x", SONNET, "a"),)),
        (
            turn("x", HOUR / 2, 10),  # before the pause
            turn("x", 2 * HOUR, 10),  # while it is paused
            turn("x", 4 * HOUR, 10),  # after it resumed
        ),
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_no_policy_starts_a_turn_on_a_paused_plan(policy: type[Policy]) -> None:
    run = simulate(_trace(), policy)

    during = run.records[1].result
    assert "a" not in rungs(during), policy.name
    assert not any(a.subscription_id == 1 for a in during.attempts), policy.name
    assert rungs(run.records[0].result) == ["a"] or policy is not FixedPolicy


def test_this_project_leaves_the_paused_plan_and_a_fixed_assignment_returns_after() -> None:
    project = [rungs(r.result) for r in simulate(_trace(), ProjectPolicy).records]
    fixed = [rungs(r.result) for r in simulate(_trace(), FixedPolicy).records]

    assert project == [["a"], ["b"], ["b"]]  # moved off the paused plan, and it stays
    assert fixed == [["a"], ["key"], ["a"]]  # never switches: the key meanwhile


def test_a_turn_already_on_a_plan_when_it_is_paused_finishes_there() -> None:
    start = PAUSED[0] - timedelta(seconds=15)
    trace = Trace(
        fleet(plan("a", paused=(PAUSED,)), plan("b"), agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", start - START, 10, 10, 10, 10),),  # +0, +10, +20, +30 s across the pause
    )
    assert rungs(simulate(trace, ProjectPolicy).records[0].result) == ["a"] * 4


def test_the_bounds_leave_a_paused_plan_out_for_its_span_only() -> None:
    spec = _trace().fleet.subscriptions[0]
    assert [usable(spec, at) for at in (START, PAUSED[0], PAUSED[1] - HOUR, PAUSED[1])] == [
        True,
        False,
        False,
        True,
    ]
    world = World(_trace().fleet)
    assert world.present(1, PAUSED[0]) and world.paused(1, PAUSED[0])


def test_a_trace_with_pauses_reads_back_as_written() -> None:
    trace = _trace()
    written = io.StringIO()
    trace_dump(trace, written)
    again = trace_parse(written.getvalue().splitlines())
    assert again.fleet.subscriptions[0].paused == (PAUSED,)
    assert again.fleet.subscriptions[1].paused == ()
    plans = json.loads(written.getvalue().splitlines()[0])["subscriptions"]
    assert "paused" in plans[0] and "paused" not in plans[1]  # none: the bytes stay


@pytest.mark.parametrize(
    ("paused", "error"),
    [
        ([[PAUSED[1].isoformat(), PAUSED[0].isoformat()]], "until is not after since"),
        ([[PAUSED[0].isoformat(), None], [PAUSED[1].isoformat(), None]], "previous pause"),
        ("soon", "expected a list"),
    ],
)
def test_a_malformed_pause_is_refused(paused: object, error: str) -> None:
    written = io.StringIO()
    trace_dump(_trace(), written)
    fleet_line, *rest = written.getvalue().splitlines()
    raw = json.loads(fleet_line)
    raw["subscriptions"][0]["paused"] = paused
    with pytest.raises(TraceError, match=error):
        trace_parse([json.dumps(raw), *rest])
