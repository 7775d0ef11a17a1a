"""The engine on v2 turns: overlapping turns of several requests, a window closing in
the middle of a turn, plans added and removed, the key priced per model."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import models

from agents.models import Agent
from bench.fleet.bounds import bounds_solve
from bench.fleet.engine import simulate
from bench.fleet.generate import small
from bench.fleet.lineup import POLICIES
from bench.fleet.policies import FixedPolicy, RoundRobinPolicy, SwitchOnFailurePolicy
from bench.fleet.project import ProjectPolicy
from bench.fleet.report import check, compare, rule_gap
from bench.fleet.trace import AgentSpec, Trace
from bench.fleet.world import World
from tests.fleet.support import OPUS, SONNET, START, fleet, plan, rungs, split_trace, turn

MINUTE = timedelta(minutes=1)


def test_overlapping_turns_interleave_their_requests_in_time_order():
    """B's first request lands between A's: it spends the window A's second request
    then finds exhausted. Run one at a time, A would have been served whole."""
    trace = Trace(
        fleet(
            plan("a", five_hour=1_000),
            agents=(AgentSpec("x", SONNET, "a"), AgentSpec("y", SONNET, "a")),
        ),
        (
            turn("x", MINUTE, 400, 400, 400),  # at +0 s, +10 s, +20 s
            replace(turn("y", MINUTE, 700, 100), at=START + MINUTE + timedelta(seconds=5)),
        ),
    )
    run = simulate(trace, FixedPolicy)
    a, b = (rungs(r.result) for r in run.records)
    assert a == ["a", "key", "key"]
    assert b == ["a", "key"]
    assert [s.at - START - MINUTE for s in run.records[1].result.served] == [
        timedelta(seconds=5),
        timedelta(seconds=15),
    ]
    assert run.metrics.key_tokens == 400 + 400 + 100


@pytest.mark.parametrize("policy", [ProjectPolicy, SwitchOnFailurePolicy])
def test_a_window_closing_mid_turn_walks_the_rest_of_the_turn_to_the_next_plan(policy):
    trace = Trace(
        fleet(plan("a", five_hour=1_000), plan("b"), agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", MINUTE, 600, 600, 300, 300),),
    )
    run = simulate(trace, policy)
    result = run.records[0].result
    assert rungs(result) == ["a", "a", "b", "b"]
    # The refusal came at the third request's instant, and the rest resumed there.
    refused = [a for a in result.attempts if not a.served]
    assert [a.request for a in refused] == [2]
    assert run.plan_tokens["five_hour"] == {"a": 1_200, "b": 600}


def test_the_key_pays_only_for_the_rest_of_a_turn_its_plan_could_not_serve():
    trace = Trace(
        fleet(plan("a", five_hour=1_000), agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", MINUTE, 600, 600, 300, 100),),
    )
    run = simulate(trace, FixedPolicy)
    assert rungs(run.records[0].result) == ["a", "a", "key", "key"]
    assert run.metrics.key_tokens == 400
    assert run.metrics.key_usd == pytest.approx(400 * 5.0 / 1e6)
    assert run.key_spend_curve()[-1][1] == pytest.approx(run.metrics.key_usd)


def test_the_key_is_priced_by_the_turns_model():
    agents = (AgentSpec("x", SONNET, None), AgentSpec("o", OPUS, None))
    trace = Trace(
        fleet(plan("a"), agents=agents, key_prices={"opus": 25.0, "sonnet": 3.0}),
        (turn("x", MINUTE, 1_000, 1_000), turn("o", 2 * MINUTE, 2_000)),
    )
    run = simulate(trace, FixedPolicy)  # no assignment: every request on the key
    assert run.metrics.key_usd == pytest.approx((2_000 * 3.0 + 2_000 * 25.0) / 1e6)
    curve = run.key_spend_curve()
    assert [round(usd * 1e6) for _, usd in curve] == [0, 3_000, 6_000, 56_000, 56_000]


def test_agents_lose_a_removed_plan_as_production_sets_null():
    field = Agent._meta.get_field("subscription")
    assert field.remote_field.on_delete is models.SET_NULL
    removed = START + timedelta(hours=1)
    trace = Trace(
        fleet(plan("a", removed_at=removed), plan("b"), agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", MINUTE, 10), turn("x", 2 * timedelta(hours=1), 10)),
    )
    run = simulate(trace, SwitchOnFailurePolicy)
    # After the removal the agent has no plan, so there is nothing to switch from:
    # the key (had it kept a, a's gone credential would have walked it to b).
    assert [rungs(r.result) for r in run.records] == [["a"], ["key"]]
    assert not any(a.subscription_id == 1 for a in run.records[1].result.attempts)


def test_a_plan_removed_while_a_turn_runs_takes_no_more_of_its_requests():
    removed = START + timedelta(minutes=1, seconds=15)
    trace = Trace(
        fleet(plan("a", removed_at=removed), agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", MINUTE, 10, 10, 10, 10),),  # +0, +10, +20, +30 s
    )
    result = simulate(trace, FixedPolicy).records[0].result
    assert rungs(result) == ["a", "a", "key", "key"]
    assert [a.subscription_id for a in result.attempts] == [1, 1, None, None]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_agent_whose_plan_is_added_later_starts_with_none(policy):
    trace = Trace(
        fleet(
            plan("a", added_at=START + timedelta(hours=2)), agents=(AgentSpec("x", SONNET, "a"),)
        ),
        (turn("x", timedelta(hours=1), 10),),
    )
    assert rungs(simulate(trace, policy).records[0].result) == ["key"]


def test_nobody_may_send_to_a_plan_that_is_not_present():
    world = World(fleet(plan("a", added_at=START + timedelta(hours=1)), agents=()))
    with pytest.raises(AssertionError, match="absent"):
        world.attempt(world.subscriptions[1].rung, model=SONNET, tokens=1, at=START)
    assert world.attempt(
        world.subscriptions[1].rung, model=SONNET, tokens=1, at=START + timedelta(hours=1)
    ).ok


@pytest.mark.parametrize("policy", POLICIES)
def test_an_added_plan_is_a_candidate_from_its_instant_only(policy):
    added = START + timedelta(hours=2)
    plans = (plan("a", five_hour=1_000, five_used=1_000), plan("b", added_at=added))
    trace = Trace(
        fleet(*plans, agents=(AgentSpec("x", SONNET, "a"),)),
        (turn("x", timedelta(hours=1), 10), turn("x", timedelta(hours=3), 10)),
    )
    run = simulate(trace, policy)  # the world asserts nobody sent to b before
    early, late = (rungs(r.result) for r in run.records)
    assert early == ["key"]
    # Every policy but the one that never switches moves onto the new plan.
    assert late == (["key"] if policy is FixedPolicy else ["b"])


def test_the_sampler_probes_an_added_plan_from_its_instant():
    added = START + timedelta(hours=2)
    trace = Trace(
        fleet(plan("a"), plan("b", added_at=added), agents=(AgentSpec("x", SONNET, "a"),)),
        (),
    )
    policy = ProjectPolicy(trace, World(trace.fleet))
    policy.sweep(START)
    assert set(policy.pool.snapshots) == {1}
    policy.sweep(added)
    assert set(policy.pool.snapshots) == {1, 2}


def test_round_robin_rotates_over_the_present_plans_only():
    removed = START + timedelta(hours=1)
    plans = (plan("a"), plan("b", removed_at=removed), plan("c"))
    trace = Trace(
        fleet(*plans, agents=(AgentSpec("x", SONNET, None),)),
        tuple(turn("x", timedelta(hours=2) + i * MINUTE, 10) for i in range(4)),
    )
    run = simulate(trace, RoundRobinPolicy)
    assert [rungs(r.result) for r in run.records] == [["a"], ["c"], ["a"], ["c"]]


@pytest.fixture(scope="module")
def split_comparison():
    trace = split_trace(small(), parts=4, gap_seconds=20.0)
    return compare(trace, bounds_solve(trace))


def test_every_request_of_a_split_trace_is_served_once_and_the_windows_agree(split_comparison):
    assert check(split_comparison) == []
    for run in split_comparison.runs:
        assert run.metrics.completed + run.metrics.failed == len(split_comparison.trace.turns)
    project = split_comparison.project
    # The split trace makes quotas bind mid-turn: some turn ran on more than one rung.
    assert any(len(set(rungs(r.result))) > 1 for r in project.records)


def test_check_finds_a_request_served_twice(split_comparison):
    run = split_comparison.runs[0]
    record = next(r for r in run.records if r.result.attempts)
    served = next(a for a in record.result.attempts if a.served)
    record.result.attempts.append(served)
    try:
        assert any("requests served" in p for p in check(split_comparison))
    finally:
        record.result.attempts.pop()


def test_the_rule_gap_counts_the_five_hour_periods_that_left_the_phase():
    """Under the simulator's rule the window after the +2 h reset starts at the +3 h
    request, so it resets at +8 h, an hour off the phase (+7 h); the first is on it."""
    trace = Trace(
        fleet(
            plan("a", five_hour=1_000, five_used=400, five_reset=timedelta(hours=2)),
            agents=(AgentSpec("x", SONNET, "a"),),
        ),
        (turn("x", timedelta(hours=1), 700), turn("x", timedelta(hours=3), 10)),
    )
    gap = rule_gap(trace, simulate(trace, ProjectPolicy))
    assert (gap.periods, gap.moved) == (2, 1)
    assert "1 of 2 5-hour periods (50.0 %)" in gap.line()
