"""The prompt cache in the fleet world: where a session's prefix is warm, what a read
and a write count in a plan's windows and cost on the key, and what moving costs.

Real worlds and real runs (``World``, ``engine.simulate``): a request's prefix is read
where its session served within the TTL, written again anywhere else.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import pytest

from bench.fleet.cache import TTL_SECONDS
from bench.fleet.engine import simulate
from bench.fleet.generate import CONTEXT_CAP, READ_WEIGHTS, WRITE_WEIGHTS, small, with_cache
from bench.fleet.lineup import POLICIES
from bench.fleet.policies import FixedPolicy
from bench.fleet.replay import schedule_replay
from bench.fleet.trace import AgentSpec, Request, Trace, Turn
from bench.fleet.world import World
from routing.rung import RungKind
from tests.fleet.support import BIG, SONNET, START, fleet, plan

WEIGHTS = {"read": 0.05, "write": 1.2}
# The key at $1e6 per Mtok: a dollar per token, so a bill reads as tokens.
PER_TOKEN = 1e6
FRESH, CACHED = 300, 10_000


def world(*plans, **extra) -> World:
    agents = (AgentSpec("x", SONNET, "a"), AgentSpec("y", SONNET, "a"))
    return World(
        fleet(
            *(plans or (plan("a"), plan("b"))),
            agents=agents,
            cache_weights=WEIGHTS,
            key_usd_per_mtok=PER_TOKEN,
            **extra,
        )
    )


def send(w: World, where: int | None, after: timedelta, session: str = "x") -> bool:
    """One request of ``session`` (FRESH fresh, CACHED cached) on plan ``where`` (the
    key when None) at ``START + after``; returns whether its prefix was warm there."""
    rung = w.key_rung if where is None else w.subscriptions[where].rung
    outcome = w.attempt(
        rung, model=SONNET, tokens=FRESH, at=START + after, cached=CACHED, session=session
    )
    assert outcome.ok
    return w.last_warm


def used(w: World, where: int) -> int:
    return w.subscriptions[where].credential.windows["five_hour"].used


READ = FRESH + math.ceil(CACHED * WEIGHTS["read"])
WRITE = FRESH + math.ceil(CACHED * WEIGHTS["write"])


def test_a_session_that_moves_writes_its_prefix_on_the_new_plan_at_the_write_weight():
    w = world()

    assert not send(w, 1, timedelta(minutes=1))  # nothing warm yet: a write
    assert send(w, 1, timedelta(minutes=2))  # warm where it served: a read
    assert not send(w, 2, timedelta(minutes=3))  # moved: written again on b

    assert used(w, 1) == WRITE + READ
    assert used(w, 2) == WRITE
    # Only the move's write is a rebuild: the first write had no warm cache anywhere.
    assert w.cache.rebuilt == CACHED


def test_the_key_bills_a_warm_read_at_a_tenth_and_a_write_at_a_quarter_more():
    w = world()

    send(w, None, timedelta(minutes=1))
    assert w.key_usd == pytest.approx(FRESH + 1.25 * CACHED)
    send(w, None, timedelta(minutes=2))
    assert w.key_usd == pytest.approx(2 * FRESH + 1.35 * CACHED)


def test_the_key_is_its_own_place_moving_onto_it_and_back_rebuilds_twice():
    w = world()
    send(w, 1, timedelta(minutes=1))

    assert not send(w, None, timedelta(minutes=2))
    assert w.key_usd == pytest.approx(FRESH + 1.25 * CACHED)
    assert not send(w, 1, timedelta(minutes=3))  # a's cache was left for the key's

    assert used(w, 1) == 2 * WRITE
    assert w.cache.rebuilt == 2 * CACHED


@pytest.mark.parametrize(
    ("idle", "warm"),
    [
        (timedelta(seconds=TTL_SECONDS - 1), True),
        (timedelta(seconds=TTL_SECONDS), True),  # the TTL's edge is still warm
        (timedelta(seconds=TTL_SECONDS + 1), False),
    ],
)
def test_a_prefix_is_warm_for_the_ttl_after_its_last_use(idle, warm):
    w = world()
    send(w, 1, timedelta(minutes=1))

    assert send(w, 1, timedelta(minutes=1) + idle) is warm
    assert used(w, 1) == WRITE + (READ if warm else WRITE)
    assert w.cache.rebuilt == 0


def test_a_prefix_gone_cold_is_written_on_the_next_plan_but_is_no_rebuild():
    w = world()
    send(w, 1, timedelta(minutes=1))

    assert not send(w, 2, timedelta(minutes=1, seconds=TTL_SECONDS + 1))
    assert used(w, 2) == WRITE
    assert w.cache.rebuilt == 0


def test_each_session_has_its_own_cache():
    w = world()
    send(w, 1, timedelta(minutes=1), session="x")

    assert not send(w, 1, timedelta(minutes=2), session="y")
    assert send(w, 1, timedelta(minutes=3), session="x")


def test_a_turn_moved_to_the_key_mid_turn_rebuilds_there_and_the_run_bills_it():
    # Plan a's 5-hour window is full once the first request (a write) is counted.
    cached = (CACHED, CACHED + FRESH)
    one = Turn(
        START + timedelta(minutes=1),
        "x",
        2 * FRESH,
        "api",
        requests=(Request(0.0, FRESH, cached[0]), Request(10.0, FRESH, cached[1])),
    )
    trace = Trace(
        fleet(
            plan("a", five_hour=WRITE),
            agents=(AgentSpec("x", SONNET, "a"),),
            cache_weights=WEIGHTS,
            key_usd_per_mtok=PER_TOKEN,
        ),
        (one,),
    )

    run = simulate(trace, FixedPolicy)

    assert [r.warm for r in run.requests] == [False, False]
    assert run.metrics.rebuilt_tokens == cached[1]
    assert run.metrics.key_usd == pytest.approx(FRESH + 1.25 * cached[1])
    assert run.key_spend_curve()[-1][1] == pytest.approx(run.metrics.key_usd)
    assert run.plan_tokens["five_hour"] == {"a": WRITE}


@pytest.fixture(scope="module")
def runs():
    trace = small()
    return trace, [simulate(trace, policy) for policy in POLICIES]


def test_a_run_replayed_pays_what_the_run_paid_reads_and_writes_as_they_fell(runs):
    trace, done = runs
    assert any(r.cached for t in trace.turns for r in t.parts)
    for run in done:
        replay = schedule_replay(trace, run.requests)

        assert replay.refusals == 0, run.policy
        assert replay.key_usd == pytest.approx(run.metrics.key_usd, rel=1e-9), run.policy


def test_the_key_spend_is_the_bill_not_the_fresh_tokens_at_list_price(runs):
    trace, done = runs
    for run in done:
        on_key = [r for r in run.requests if r.rung.kind is RungKind.API_KEY]
        fresh = sum(r.tokens * r.usd_per_mtok / 1e6 for r in on_key)
        billed = sum(
            trace.fleet.key_usd(
                trace.model_of(trace.turns[r.turn]), Request(0, r.tokens, r.cached), warm=r.warm
            )
            for r in on_key
        )
        assert on_key, run.policy
        assert run.metrics.key_usd == pytest.approx(billed), run.policy
        assert run.metrics.key_usd > fresh, run.policy


def test_a_policy_that_moves_agents_rebuilds_more_than_one_that_never_does(runs):
    _, done = runs
    rebuilt = {run.policy: run.metrics.rebuilt_tokens for run in done}

    assert rebuilt["round-robin"] > rebuilt["fixed assignment"] > 0


# The generator's cache model


def test_a_turn_reads_its_agents_prefix_then_its_context_so_far():
    base = Turn(START, "x", 6, "api", requests=(Request(0, 1), Request(5, 2), Request(9, 3)))
    big = Turn(START, "y", BIG, "api", requests=(Request(0, BIG - 1), Request(5, 1)))
    agents = (AgentSpec("x", SONNET, "a"), AgentSpec("y", SONNET, "a"))
    trace = Trace(fleet(plan("a"), agents=agents, seed=9), (base, big))

    cached = with_cache(trace)

    x, y = cached.turns
    prefix = x.requests[0].cached
    assert 10_000 <= prefix <= 30_000
    assert [r.cached for r in x.requests] == [prefix, prefix + 1, prefix + 3]
    assert y.requests[1].cached == CONTEXT_CAP
    assert [r.tokens for r in x.requests] == [1, 2, 3]  # the fresh tokens stay
    weights = cached.fleet.cache_weights
    assert READ_WEIGHTS[0] <= weights["read"] <= READ_WEIGHTS[1]
    assert WRITE_WEIGHTS[0] <= weights["write"] <= WRITE_WEIGHTS[1]
    assert with_cache(trace) == cached
    assert with_cache(replace(trace, fleet=replace(trace.fleet, seed=10))) != cached


def test_a_failed_request_is_priced_as_the_bound_prices_it() -> None:
    """Warm when another request of its session comes within the TTL before it (or
    at the same instant), else a write: ``engine._may_be_warm`` is ``may_be_warm``."""
    from datetime import UTC, datetime

    from bench.fleet.cache import TTL_SECONDS
    from bench.fleet.engine import _may_be_warm

    at = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
    t = at.timestamp()
    assert _may_be_warm([t - TTL_SECONDS, t], at)
    assert not _may_be_warm([t - TTL_SECONDS - 1, t], at)
    assert _may_be_warm([t, t], at)  # two at one instant: either may go first
    assert not _may_be_warm([t], at)
