"""A small trace through every policy and the bounds: what must hold, not timings.

No turn is lost or run twice; each plan's windows counted exactly the turns it
served; a run is a function of its trace (deterministic for a seed); each run
replayed as a schedule is served whole and pays what the run paid; no policy spends
less on the key than the lower bound; the achievable row is the cheapest schedule
known.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import timedelta

import pytest

from bench.fleet.bounds import bounds_solve
from bench.fleet.engine import simulate
from bench.fleet.generate import small
from bench.fleet.lineup import POLICIES
from bench.fleet.project import ProjectPolicy, RebalancingProjectPolicy
from bench.fleet.replay import Replay
from bench.fleet.report import BASELINES, check, compare
from bench.fleet.tables import HEADER, prices, table, targets
from bench.fleet.world import World
from routing.headroom.reading import Reading, ReadingStatus, WindowReading
from routing.rung import RungKind
from tests.fleet.support import split_trace


@pytest.fixture(scope="module")
def comparison():
    trace = small()
    return compare(trace, bounds_solve(trace))


def test_no_turn_is_lost_or_run_twice_and_the_windows_agree(comparison):
    assert check(comparison) == []
    for run in comparison.runs:
        assert [r.index for r in run.records] == list(range(len(comparison.trace.turns)))
        # Each request served at most once, in order: served requests are a prefix.
        assert all(
            [x.request for x in r.result.served] == list(range(r.result.next)) for r in run.records
        )
        assert run.metrics.completed + run.metrics.failed == len(comparison.trace.turns)


def test_the_small_trace_makes_quotas_bind(comparison):
    """Otherwise the other assertions would hold for a trace that tests nothing."""
    project = comparison.project
    assert comparison.bounds.lower_usd > 0
    assert project.metrics.refusals > 0
    assert project.metrics.switches > 0
    kinds = {r.result.served_by.kind for r in project.records if r.result.served_by}
    assert kinds == {RungKind.SUBSCRIPTION, RungKind.API_KEY}
    # small-b is revoked at 18:00: its turns after that were refused for auth first.
    revoked_id = 2
    late = [r for r in project.records if r.turn.at.hour >= 18]
    assert not any(
        a.subscription_id == revoked_id and a.served for r in late for a in r.result.attempts
    )


def test_the_lower_bound_is_never_above_any_policys_spend_or_the_achievable(comparison):
    lower = comparison.bounds.lower_usd
    for run in comparison.runs:
        assert lower <= run.metrics.key_usd + run.metrics.failed_usd + 1e-4, run.policy
    assert lower <= comparison.achievable.usd + 1e-4


def test_every_runs_replay_is_served_whole_and_pays_what_the_run_paid(comparison):
    for run, replay in zip(comparison.runs, comparison.replays, strict=True):
        assert replay.refusals == 0, run.policy
        assert replay.key_usd == pytest.approx(run.metrics.key_usd, rel=1e-12), run.policy
    # Not trivial: every run refused requests and paid the key for some.
    assert all(run.metrics.refusals > 0 and run.metrics.key_usd > 0 for run in comparison.runs)


def test_the_achievable_row_is_the_cheapest_of_the_heuristic_and_every_replay(comparison):
    spends = {r.policy: r.metrics.key_usd + r.metrics.failed_usd for r in comparison.runs}
    cheapest = min(spends, key=spends.__getitem__)
    dear = replace(comparison, bounds=replace(comparison.bounds, achievable_usd=1e9))
    cheap_usd = comparison.bounds.lower_usd
    cheap = replace(comparison, bounds=replace(comparison.bounds, achievable_usd=cheap_usd))

    assert dear.achievable.source == f"replay of {cheapest}"
    assert dear.achievable.usd == pytest.approx(spends[cheapest])
    assert f"| achievable (replay of {cheapest}) |" in table(dear)
    # The sidecar's figure names the schedule it came from (the cheapest tried).
    source = comparison.bounds.achievable_source
    assert cheap.achievable.source == source
    assert cheap.achievable.usd == cheap_usd
    assert f"| achievable ({source}) |" in table(cheap)


def test_check_flags_a_policy_and_the_achievable_below_the_lower_bound(comparison):
    spends = sorted(r.metrics.key_usd + r.metrics.failed_usd for r in comparison.runs)
    cheapest = min(spends[0], comparison.achievable.usd)
    at_it = replace(comparison, bounds=replace(comparison.bounds, lower_usd=cheapest))
    above = replace(comparison, bounds=replace(comparison.bounds, lower_usd=cheapest + 0.01))

    assert check(at_it) == []
    flagged = [p for p in check(above) if "below the lower bound" in p]
    below = sum(s < cheapest + 0.01 for s in spends) + (comparison.achievable.usd < cheapest + 0.01)
    assert len(flagged) == below >= 1


def test_check_flags_a_replay_refused_or_paying_differently(comparison):
    run = comparison.runs[0]
    refused = (Replay(run.metrics.key_usd, 1), *comparison.replays[1:])
    dearer = (Replay(run.metrics.key_usd + 0.01, 0), *comparison.replays[1:])

    assert check(replace(comparison, replays=refused)) == [
        f"{run.policy}: its replay was refused 1 time(s)"
    ]
    assert [p.split(":")[0] for p in check(replace(comparison, replays=dearer))] == [run.policy]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_run_is_deterministic_for_a_seed(policy):
    """Also with overlapping multi-request turns: the event order is total."""
    trace = split_trace(small(5), parts=4, gap_seconds=30.0)
    first, second = simulate(trace, policy), simulate(trace, policy)
    assert asdict(first.metrics) == asdict(second.metrics)
    assert [r.result for r in first.records] == [r.result for r in second.records]


def test_the_table_has_a_row_per_policy_the_new_columns_and_the_bounds(comparison):
    rendered = table(comparison)
    for policy in POLICIES:
        assert f"| {policy.name} |" in rendered
    assert HEADER in rendered
    assert "| key $ | × achievable |" in HEADER
    assert "| ping-pongs | rebuilt Mtok | notices |" in HEADER
    rows = [line for line in rendered.splitlines() if line.startswith("| ")]
    assert {row.count("|") for row in rows} == {HEADER.count("|")}
    project = comparison.project.metrics
    assert f"| {project.ping_pongs} | {project.rebuilt_tokens / 1e6:.2f} |" in rendered
    assert "optimum" not in rendered
    lower = comparison.bounds.lower_usd
    assert "| lower bound (MILP): optimal, gap " in rendered
    assert f"| {lower:.2f} |" in rendered
    fleet = comparison.trace.fleet
    assert "key $/Mtok per model family: opus $25, sonnet $5, " in rendered.splitlines()[0]
    assert prices(replace(fleet, key_prices={})) == "key $5/Mtok for every model family"
    assert comparison.rule is not None
    assert comparison.rule.line() in rendered


def test_the_targets_list_the_baselines_that_beat_this_project_by_how_much(comparison):
    own = comparison.project.metrics.key_usd
    baseline = BASELINES[0]
    runs = tuple(
        replace(r, metrics=replace(r.metrics, key_usd=own - 1.5)) if r.policy == baseline else r
        for r in comparison.runs
    )
    others = [name for name in BASELINES[1:] if comparison.run_of(name).metrics.key_usd < own]
    line = targets([replace(comparison, runs=runs)]).splitlines()[2]

    assert f"missed: {baseline} by $1.50" in line
    assert all(f"{name} by $" in line for name in others)
    # One ping-pong per agent per week: three agents over one day.
    assert f" of {3 / 7:.1f} (" in line


def _reading(at, seven_day: float) -> Reading:
    week = timedelta(days=7)
    return Reading(
        fetched_at=at,
        status=ReadingStatus.OK,
        windows={
            "five_hour": WindowReading(0.0, at + timedelta(hours=5), "allowed"),
            "seven_day": WindowReading(seven_day, at + week, "allowed"),
        },
        source="probe",
    )


def test_the_rebalancing_row_rebalances_from_its_sweep_and_the_projects_row_does_not():
    trace = small()
    at = trace.fleet.start
    for policy_type, moves in ((RebalancingProjectPolicy, 1), (ProjectPolicy, 0)):
        policy = policy_type(trace, World(trace.fleet))
        a, b = policy.world.by_name["small-a"].id, policy.world.by_name["small-b"].id
        # small-a: 1.5 % left (below the 2 % floor); small-b: 50 % left.
        policy.pool.snapshots.update({a: _reading(at, 98.5), b: _reading(at, 50.0)})
        if policy.rebalances:
            policy._rebalance(at)
        after = dict(policy.assignment)
        # Two agents on small-a; at most one moves onto small-b per sweep.
        assert sum(1 for name in ("agent-1", "agent-3") if after[name] == b) == moves
        assert policy.sent == moves
