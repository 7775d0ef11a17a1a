"""The held-out runner: drawn traces run in spawned workers, the distribution, the targets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bench.fleet.families import Limits
from bench.fleet.holdout import (
    Outcome,
    distribution,
    holdout_main,
    outcomes_of,
    row,
    verdicts,
)

TINY = Limits(turns=30, requests=90, min_turns=20)


def _outcome(name: str = "flat-00-s1", **changes: Any) -> Outcome:
    base = Outcome(
        name=name,
        family=name.rsplit("-", 2)[0],
        agents=10,
        plans=4,
        turns=100,
        requests=400,
        demand=1.1,
        project_usd=100.0,
        baselines={"round-robin": 101.0, "pi-router balanced": 100.0},
        achievable_usd=95.0,
        achievable_source="heuristic",
        ratio=100.0 / 95.0,
        lower_usd=40.0,
        lower_status="Optimal",
        failed_while_servable=0,
        ping_pongs=5,
        agent_weeks=10.0,
        seconds=5.0,
        bounds_seconds=2.0,
    )
    return replace(base, **changes)


@pytest.fixture(scope="module")
def ran() -> list[Outcome]:
    """Two tiny drawn traces, each in a spawned worker that boots Django itself."""
    return list(outcomes_of(7, 2, time_limit=2.0, workers=2, limits=TINY))


def test_two_tiny_traces_run_in_workers_and_come_back_in_order(ran: list[Outcome]):
    assert [o.name for o in ran] == ["flat-00-s7", "diurnal-one-office-01-s7"]
    for outcome in ran:
        assert outcome.problems == ()
        assert outcome.turns <= TINY.turns
        assert set(outcome.baselines) == {
            "fixed assignment",
            "round-robin",
            "switch on failure",
            "pi-router balanced",
            "soonest weekly reset",
        }
        assert outcome.lower_usd <= outcome.achievable_usd + 1e-4
        assert outcome.ratio >= 1.0 - 1e-9
        assert outcome.name in row(outcome)


def test_the_distribution_and_every_target_are_reported(ran: list[Outcome]):
    text = distribution(ran)
    assert "× achievable (this project)" in text
    assert "| flat | 1 |" in text and "| diurnal-one-office | 1 |" in text
    lines = verdicts(ran, wall_seconds=10.0)
    assert len(lines) == 7
    assert "10 s for 2, 250 s projected for 50" in lines[-1][1]


def test_the_targets_pass_and_miss_at_their_edges():
    at_edge = [
        _outcome(f"flat-{i:02d}-s1", project_usd=100.0, ratio=1.10 if i < 11 else 1.30)
        for i in range(20)
    ]
    # One in twenty above a baseline (95 % at or below), by exactly 2 %.
    at_edge[0] = _outcome("flat-00-s1", project_usd=102.0, ratio=1.10)
    met = [ok for ok, _ in verdicts(at_edge, wall_seconds=599.0 * 20 / 50)]
    assert met == [True] * 7
    over = [replace(o, project_usd=102.1) if i < 2 else o for i, o in enumerate(at_edge)]
    met = [ok for ok, _ in verdicts(over, wall_seconds=600.0 * 20 / 50)]
    assert met == [False, False, True, True, True, True, False]
    failing = [_outcome(ratio=1.31, failed_while_servable=1, ping_pongs=11)]
    met = [ok for ok, _ in verdicts(failing, wall_seconds=1.0)]
    assert met == [True, True, False, False, False, False, True]


def test_a_baseline_that_spent_nothing_is_beaten_only_by_nothing():
    free = {"round-robin": 0.0}
    assert _outcome(project_usd=0.0, baselines=free).excess == 0.0
    assert _outcome(project_usd=0.01, baselines=free).excess == float("inf")


def test_a_run_prints_its_seed_first_and_exits_0_when_sound(capsys: pytest.CaptureFixture[str]):
    assert holdout_main(1, 11, time_limit=2.0, workers=1, limits=TINY) == 0
    out = capsys.readouterr().out
    assert out.startswith("Held-out run: 1 trace(s) from seed 11 (given; repeat with")
    assert "| flat-00-s11 |" in out
    assert "Held-out targets, measured:" in out
