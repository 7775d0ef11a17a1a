"""The LP-planned schedule (``bench.fleet.horizon``) and the cache-aware bounds.

Tiny fleets whose optimum is found by trying every assignment through ``World``,
with and without cached prompt prefixes.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from bench.fleet.achievable import achievable_replay
from bench.fleet.cells import requests_of
from bench.fleet.horizon import horizon_replay
from bench.fleet.milp import lower_solve
from bench.fleet.trace import Request, Trace, Turn
from bench.fleet.world import World
from tests.fleet.test_bounds import START, brute_force, plan, random_trace, trace_of, turn


def cached_optimum(trace: Trace) -> float:
    """Every assignment of every request replayed through ``World`` with its prefix
    and session; a refused request goes to the key (billed as the world bills)."""
    requests = requests_of(trace)
    best = float("inf")
    for choice in itertools.product(
        range(len(trace.fleet.subscriptions) + 1), repeat=len(requests)
    ):
        world = World(trace.fleet)
        for request, s in zip(requests, choice, strict=True):
            sent: dict[str, Any] = dict(
                model=request.model,
                tokens=request.tokens,
                at=request.at,
                cached=request.cached,
                session=request.session,
            )
            if not s or not world.attempt(world.subscriptions[s].rung, **sent).ok:
                world.attempt(world.key_rung, **sent)
        best = min(best, world.key_usd)
    return best


def replayed(trace: Trace, schedule: tuple[int | None, ...]) -> tuple[float, int]:
    """The schedule sent again through a fresh world: its key $ and refusals."""
    world, refusals = World(trace.fleet), 0
    for request, s in zip(requests_of(trace), schedule, strict=True):
        rung = world.key_rung if s is None else world.subscriptions[s + 1].rung
        outcome = world.attempt(
            rung,
            model=request.model,
            tokens=request.tokens,
            at=request.at,
            cached=request.cached,
            session=request.session,
        )
        refusals += not outcome.ok
    return world.key_usd, refusals


def cached_trace(seed: int) -> Trace:
    """Two plans, turns of two or three requests with cached prefixes."""
    rng = random.Random(seed)
    plans = (
        plan("a", five_hour=rng.randint(200, 600), sonnet=rng.randint(150, 400)),
        plan("b", five_hour=rng.randint(100, 300), revoked_at=START + timedelta(hours=9)),
    )
    turns = []
    for agent in ("h", "s", "s"):
        parts = tuple(
            Request(60.0 * i, rng.randint(10, 120), rng.randint(0, 300))
            for i in range(rng.randint(1, 2))
        )
        at = START + timedelta(minutes=rng.uniform(0, 12 * 60))
        turns.append(Turn(at, agent, sum(p.tokens for p in parts), "api", requests=parts))
    trace = trace_of(plans, turns)
    return replace(trace, fleet=replace(trace.fleet, key_prices={"haiku": 1e6, "sonnet": 5e6}))


def test_the_plan_keeps_the_window_for_the_dearer_request_to_come():
    # The haiku request comes first; the window fits one of the two, and the key
    # charges five times more for the sonnet one.
    trace = trace_of((plan(five_hour=100),), [turn(10, 100, "h"), turn(50, 100, "s")])
    trace = replace(trace, fleet=replace(trace.fleet, key_prices={"haiku": 1.0, "sonnet": 5.0}))
    schedule = horizon_replay(trace)

    assert schedule.schedule == (None, 0)
    assert schedule.usd == pytest.approx(100 / 1e6)
    assert brute_force(trace) == pytest.approx(schedule.usd)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("horizon", [None, 3600.0])
def test_the_optimum_lies_between_the_bound_and_the_plan(seed, horizon):
    trace = random_trace(seed)
    optimum = brute_force(trace)
    schedule = horizon_replay(trace, horizon=horizon)

    assert lower_solve(trace).usd <= optimum + 1e-3
    assert schedule.usd >= optimum - 1e-9
    assert replayed(trace, schedule.schedule) == (pytest.approx(schedule.usd), 0)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_with_cached_prefixes_the_bound_stays_below_every_schedule(seed):
    trace = cached_trace(seed)
    optimum = cached_optimum(trace)
    lower = lower_solve(trace).usd
    planned = horizon_replay(trace)
    greedy = achievable_replay(trace)

    assert lower <= optimum * (1 + 1e-6) + 1e-6
    assert planned.usd >= optimum * (1 - 1e-9)
    assert greedy.usd >= optimum * (1 - 1e-9)
    assert replayed(trace, planned.schedule) == (pytest.approx(planned.usd), 0)
    assert replayed(trace, greedy.schedule) == (pytest.approx(greedy.usd), 0)


def test_a_turn_stays_on_the_plan_its_prefix_is_warm_on():
    # Both plans have room for everything; a turn that moved would write its
    # prefix again, so each turn's requests all go where its first went.
    parts = tuple(Request(30.0 * i, 50, 400) for i in range(6))
    turns = [Turn(START + timedelta(minutes=m), "s", 300, "api", requests=parts) for m in (5, 60)]
    trace = trace_of((plan("a"), plan("b")), turns)
    schedule = horizon_replay(trace)

    assert schedule.usd == 0
    assert len(set(schedule.schedule[:6])) == 1 and len(set(schedule.schedule[6:])) == 1
    world = World(trace.fleet)
    for request, s in zip(requests_of(trace), schedule.schedule, strict=True):
        assert s is not None
        world.attempt(
            world.subscriptions[s + 1].rung,
            model=request.model,
            tokens=request.tokens,
            at=request.at,
            cached=request.cached,
            session=request.session,
        )
    assert world.cache.rebuilt == 0


def test_the_plan_is_deterministic():
    trace = cached_trace(3)
    first, second = horizon_replay(trace, horizon=3600.0), horizon_replay(trace, horizon=3600.0)

    assert (first.usd, first.curve, first.schedule) == (second.usd, second.curve, second.schedule)
