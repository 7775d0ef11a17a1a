"""The two outside baselines' rules, each pinned by a small trace: pi-router's
balanced pick with its 20 % incumbent hysteresis, soonest weekly reset's day of
stickiness, and the blocks both keep after a refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agents.client import TurnOutcome
from bench.fleet.engine import simulate
from bench.fleet.policies import PiRouterPolicy, SoonestWeeklyResetPolicy, _Blocks
from bench.fleet.project import ProjectPolicy
from bench.fleet.trace import AgentSpec, Trace
from bench.fleet.world import World
from tests.fleet.support import OPUS, SONNET, START, drive, fleet, plan, rungs, turn

MINUTE = timedelta(minutes=1)
AGENT = (AgentSpec("x", SONNET, "a"),)


def _pi(b_used: int, *, incumbent: int | None) -> list[str]:
    """One turn of x under pi-router: a's 5 h window half used, b's ``b_used`` of 1,000,
    both resetting in five hours (so the scores compare as what each has left)."""
    plans = (
        plan("a", five_hour=1_000, five_used=500),
        plan("b", five_hour=1_000, five_used=b_used),
    )
    trace = Trace(fleet(*plans, agents=AGENT), ())
    policy = PiRouterPolicy(trace, World(trace.fleet))
    if incumbent is not None:
        policy.incumbent["x"] = incumbent  # the plan that last served x
    return rungs(drive(policy, turn("x", timedelta(seconds=1), 10)))


@pytest.mark.parametrize(
    ("b_used", "incumbent", "served"),
    [
        (405, 1, ["a"]),  # b 19 % better: the incumbent stays
        (400, 1, ["a"]),  # b exactly 20 % better: still not strictly more
        (395, 1, ["b"]),  # b 21 % better: the challenger wins
        (405, None, ["b"]),  # no incumbent: the best score
        (405, 2, ["b"]),
    ],
)
def test_pi_router_keeps_its_incumbent_unless_a_challenger_is_over_20_percent_better(
    b_used, incumbent, served
):
    assert _pi(b_used, incumbent=incumbent) == served


def test_pi_router_continues_a_turn_where_it_is_and_walks_past_a_refusal():
    plans = (plan("a", five_hour=1_000), plan("b", five_hour=1_000, five_used=100))
    trace = Trace(fleet(*plans, agents=AGENT), (turn("x", MINUTE, 600, 600, 300, 300),))
    run = simulate(trace, PiRouterPolicy)
    # a scores best at the start; the turn stays there until a refuses, then b.
    assert rungs(run.records[0].result) == ["a", "a", "b", "b"]
    # The next turn does not go back to a: refused (blocked) and read exhausted.
    later = Trace(trace.fleet, (*trace.turns, turn("x", 10 * MINUTE, 10)))
    assert rungs(simulate(later, PiRouterPolicy).records[1].result) == ["b"]


def _refusal(resets_at=None, window: str = "five_hour") -> TurnOutcome:
    return TurnOutcome(
        status_code=429,
        ok=False,
        error_code="rate_limit",
        resets_at=resets_at,
        limiting_window=window,
    )


def test_a_block_lasts_until_the_reported_reset():
    blocks = _Blocks()
    blocks.block(1, _refusal(START + timedelta(hours=2)), "seven_day_sonnet", START)
    assert blocks.blocked(1, "seven_day_sonnet", START + timedelta(hours=2) - MINUTE)
    assert not blocks.blocked(1, "seven_day_sonnet", START + timedelta(hours=2))
    assert not blocks.blocked(2, "seven_day_sonnet", START)


def test_a_block_without_a_reset_backs_off_five_minutes_doubling_to_sixty():
    blocks = _Blocks()
    now, lengths = START, []
    for _ in range(6):
        blocks.block(1, _refusal(), None, now)
        until = blocks.until[(1, "*")]
        lengths.append(int((until - now).total_seconds() // 60))
        now = until
    assert lengths == [5, 10, 20, 40, 60, 60]
    blocks.served(1, None)
    blocks.block(1, _refusal(), None, now)
    assert blocks.until[(1, "*")] - now == timedelta(minutes=5)


def test_a_family_window_refusal_blocks_that_family_only():
    blocks = _Blocks()
    blocks.block(
        1, _refusal(START + timedelta(days=1), "seven_day_sonnet"), "seven_day_sonnet", START
    )
    assert blocks.blocked(1, "seven_day_sonnet", START + MINUTE)
    assert not blocks.blocked(1, "seven_day_opus", START + MINUTE)


def test_soonest_weekly_reset_picks_the_soonest_and_keeps_it_for_a_day():
    plans = (plan("a", weekly_reset=timedelta(days=3)), plan("b", weekly_reset=timedelta(days=1)))
    turns = (
        turn("x", timedelta(hours=20), 10),  # b resets at +1 d: the soonest
        # b has reset (next +8 d), a (+3 d) is sooner, but x has kept b only 5 h.
        turn("x", timedelta(days=1, hours=1), 10),
        turn("x", timedelta(days=1, hours=21), 10),  # 25 h on b: a, the soonest
    )
    run = simulate(Trace(fleet(*plans, agents=AGENT), turns), SoonestWeeklyResetPolicy)
    assert [rungs(r.result) for r in run.records] == [["b"], ["b"], ["a"]]


def test_soonest_weekly_reset_leaves_its_plan_within_the_day_when_it_refuses():
    plans = (
        plan("a", weekly_reset=timedelta(days=3)),
        plan("b", weekly_reset=timedelta(days=1), five_hour=1_000),
    )
    turns = (turn("x", MINUTE, 600, 600, 10), turn("x", 2 * MINUTE, 10))
    run = simulate(Trace(fleet(*plans, agents=AGENT), turns), SoonestWeeklyResetPolicy)
    assert [rungs(r.result) for r in run.records] == [["b", "b", "a"], ["a"]]


def test_a_project_turn_whose_agent_moved_meanwhile_loses_its_commit_and_says_nothing():
    """Two overlapping turns of x both leave the exhausted a for b: the first to end
    commits (one notice), the second's compare-and-set expects a and loses."""
    plans = (plan("a", five_hour=1_000, five_used=1_000), plan("b"))
    turns = (turn("x", MINUTE, 10, 10, 10), turn("x", MINUTE + timedelta(seconds=1), 10, 10, 10))
    run = simulate(Trace(fleet(*plans, agents=(AgentSpec("x", OPUS, "a"),)), turns), ProjectPolicy)
    assert [rungs(r.result) for r in run.records] == [["b"] * 3, ["b"] * 3]
    assert run.metrics.notifications == 1
