"""The bounds that bracket the hindsight optimum: lower ≤ any run ≤ ... ≤ achievable.

Tiny fleets with hand-sized windows, so each bound can be worked out by hand or the
true optimum found by trying every assignment through ``World``.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agents.client import TurnOutcome
from bench.fleet.achievable import achievable_replay
from bench.fleet.bounds import CALM, bounds_for, bounds_solve, sidecar_of, thinned
from bench.fleet.cells import FlatRequest, requests_of
from bench.fleet.foresight import Foresight
from bench.fleet.generate import small
from bench.fleet.milp import lower_solve
from bench.fleet.trace import (
    AgentSpec,
    Fleet,
    Request,
    SubscriptionSpec,
    Trace,
    Turn,
    WindowSpec,
    trace_write,
)
from bench.fleet.world import World
from routing.rung import Rung

START = datetime(2030, 1, 7, tzinfo=UTC)
HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
PER_TOKEN = 1e6  # a key price of $1e6 per Mtok: $ read as tokens
BIG = 10**9


def plan(
    name: str = "a", *, five_hour: int = BIG, seven_day: int = BIG, sonnet: int = BIG, **kw
) -> SubscriptionSpec:
    windows = {
        "five_hour": WindowSpec(five_hour, START + timedelta(hours=5), kw.pop("five_used", 0)),
        "seven_day": WindowSpec(seven_day, START + timedelta(days=7)),
        "seven_day_sonnet": WindowSpec(sonnet, START + timedelta(days=7)),
        "seven_day_opus": WindowSpec(BIG, START + timedelta(days=7)),
    }
    return SubscriptionSpec(name, "max-5x", windows, **kw)


def trace_of(plans: tuple[SubscriptionSpec, ...], turns: list[Turn]) -> Trace:
    fleet = Fleet(
        name="tiny",
        start=START,
        end=START + timedelta(days=1),
        subscriptions=plans,
        agents=(AgentSpec("h", HAIKU, None), AgentSpec("s", SONNET, None)),
        key_usd_per_mtok=PER_TOKEN,
    )
    return Trace(fleet, tuple(sorted(turns, key=lambda t: t.at)))


def turn(minutes: float, tokens: int, agent: str = "h", parts: tuple[int, ...] = ()) -> Turn:
    requests = tuple(Request(60.0 * i, n) for i, n in enumerate(parts))
    at = START + timedelta(minutes=minutes)
    return Turn(at, agent, sum(parts) or tokens, "api", requests=requests)


def attempt(world: World, rung: Rung, request: FlatRequest) -> TurnOutcome:
    return world.attempt(rung, model=request.model, tokens=request.tokens, at=request.at)


def brute_force(trace: Trace) -> float:
    """The true optimum: every assignment of every request (a plan or the key)
    replayed through ``World``; a refused request is paid on the key."""
    requests = requests_of(trace)
    best = float("inf")
    for choice in itertools.product(
        range(len(trace.fleet.subscriptions) + 1), repeat=len(requests)
    ):
        world, spent = World(trace.fleet), 0.0
        for request, s in zip(requests, choice, strict=True):
            spec = trace.fleet.subscriptions[s - 1] if s else None
            if spec is not None and spec.revoked_at is not None and request.at >= spec.revoked_at:
                world.revoke(spec.name, request.at)
            usable = spec is not None and spec.present(request.at)
            if not usable or not attempt(world, world.subscriptions[s].rung, request).ok:
                spent += request.tokens * trace.fleet.key_price(request.model) / 1e6
        best = min(best, spent)
    return best


def test_the_biggest_request_crossing_first_closes_the_window_for_the_rest():
    # 1000 tokens cross a 150-token window; the two later requests find it closed.
    trace = trace_of((plan(five_hour=150),), [turn(10, 1000), turn(70, 100), turn(130, 100)])

    assert lower_solve(trace).usd == pytest.approx(200, abs=1e-3)
    assert achievable_replay(trace).usd == pytest.approx(200)
    assert brute_force(trace) == pytest.approx(200)


def test_one_crossing_lets_at_most_left_less_one_plus_the_largest_request_through():
    # Three requests of 100 against 150 left: the relaxation serves 149 + 100 (the
    # truth is 200: the second request crosses and the third is refused).
    trace = trace_of((plan(five_hour=150),), [turn(10, 0, parts=(100, 100, 100))])

    assert lower_solve(trace).usd == pytest.approx(51, abs=1e-3)
    assert brute_force(trace) == pytest.approx(100)
    assert achievable_replay(trace).usd == pytest.approx(100)


def test_a_window_exhausted_at_the_start_serves_nothing_until_it_resets():
    trace = trace_of(
        (plan(five_hour=150, five_used=150),), [turn(60, 40), turn(4 * 60, 50), turn(6 * 60, 70)]
    )

    assert lower_solve(trace).usd == pytest.approx(90, abs=1e-3)
    assert achievable_replay(trace).usd == pytest.approx(90)


def test_nothing_is_served_before_a_plan_is_added_or_once_it_is_revoked():
    added = plan("late", added_at=START + timedelta(hours=2))
    revoked = plan("gone", revoked_at=START + timedelta(hours=3))
    turns = [turn(60, 30), turn(150, 20), turn(200, 10)]

    assert lower_solve(trace_of((added,), turns)).usd == pytest.approx(30, abs=1e-3)
    assert lower_solve(trace_of((revoked,), turns)).usd == pytest.approx(10, abs=1e-3)
    assert achievable_replay(trace_of((added,), turns)).usd == pytest.approx(30)
    assert achievable_replay(trace_of((revoked,), turns)).usd == pytest.approx(10)


def test_the_key_is_priced_per_model_family():
    trace = trace_of((plan(five_hour=50),), [turn(10, 100, "h"), turn(50, 100, "s")])
    trace = replace(trace, fleet=replace(trace.fleet, key_prices={"haiku": 1.0, "sonnet": 5.0}))

    # The bound crosses with the dear sonnet request after 49 haiku tokens; the best
    # schedule leaves the window to the sonnet request and pays for the haiku one.
    assert lower_solve(trace).usd == pytest.approx(51 / 1e6, rel=1e-4)
    assert brute_force(trace) == pytest.approx(100 / 1e6)
    assert achievable_replay(trace).usd == pytest.approx(100 / 1e6)


def test_a_turn_that_runs_past_the_trace_end_still_counts():
    last = START + timedelta(days=1, seconds=-30)
    parts = (Request(0.0, 100), Request(60.0, 200))
    trace = trace_of((plan(five_hour=50),), [Turn(last, "h", 300, "api", requests=parts)])

    # The second request, after the end, crosses: 49 + 200 served, 51 on the key.
    assert lower_solve(trace).usd == pytest.approx(51, abs=1e-3)
    assert achievable_replay(trace).usd == pytest.approx(100)


def random_trace(seed: int) -> Trace:
    rng = random.Random(seed)
    plans = (
        plan("a", five_hour=rng.randint(60, 200), seven_day=rng.randint(200, 400), sonnet=150),
        plan("b", five_hour=rng.randint(50, 150), revoked_at=START + timedelta(hours=9)),
    )
    turns = [
        turn(rng.uniform(0, 12 * 60), 0, rng.choice("hs"), (rng.randint(20, 200),))
        for _ in range(5)
    ]
    parts = (rng.randint(20, 200), rng.randint(20, 200), rng.randint(20, 200))
    turns.append(turn(rng.uniform(0, 12 * 60), 0, "s", parts))
    return trace_of(plans, turns)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_optimum_lies_between_the_bounds(seed):
    trace = random_trace(seed)
    optimum = brute_force(trace)

    assert lower_solve(trace).usd <= optimum + 1e-3
    for calm in CALM:
        assert achievable_replay(trace, calm=calm).usd >= optimum - 1e-9


def test_the_schedule_replays_with_no_refusal_and_costs_what_the_world_counted():
    trace = random_trace(4)
    schedule = achievable_replay(trace)
    world, key = World(trace.fleet), 0.0
    for request, s in zip(requests_of(trace), schedule.schedule, strict=True):
        rung = world.key_rung if s is None else world.subscriptions[s + 1].rung
        assert attempt(world, rung, request).ok
        key += request.tokens * trace.fleet.key_price(request.model) / 1e6 if s is None else 0
    served = sum(world.window_tokens("seven_day").values())
    everything = sum(r.tokens for r in requests_of(trace))

    assert schedule.usd == pytest.approx(key)
    on_plans = zip(requests_of(trace), schedule.schedule, strict=True)
    assert served == sum(r.tokens for r, s in on_plans if s is not None)
    assert 0 < served < everything  # the key paid for some: the case is not trivial
    assert schedule.curve[-1][1] == pytest.approx(schedule.usd)


def test_the_sidecar_is_read_while_the_trace_is_unchanged_and_solved_again_after(tmp_path):
    path = tmp_path / "tiny.jsonl"
    trace = trace_of((plan(five_hour=150),), [turn(10, 1000), turn(70, 100)])
    trace_write(trace, path)
    first = bounds_for(trace, path)
    sidecar = sidecar_of(path)
    raw = json.loads(sidecar.read_text())
    raw["lower_usd"] = 12345.0
    sidecar.write_text(json.dumps(raw))

    assert first.lower_usd == pytest.approx(100, abs=1e-3)
    assert bounds_for(trace, path).lower_usd == 12345.0  # a hit
    assert bounds_for(trace, path, refresh=True).lower_usd == pytest.approx(100, abs=1e-3)
    changed = trace_of((plan(five_hour=150),), [turn(10, 1000), turn(70, 300)])
    trace_write(changed, path)
    sidecar.write_text(json.dumps(raw))
    assert bounds_for(changed, path).lower_usd == pytest.approx(300, abs=1e-3)  # a miss
    assert json.loads(sidecar.read_text())["trace_sha256"] != raw["trace_sha256"]


def test_foresight_counts_the_dearer_requests_to_come_up_to_enough():
    rng = random.Random(7)
    requests = [
        FlatRequest(START + timedelta(minutes=i), HAIKU, "haiku", rng.randint(1, 1000))
        for i in range(300)
    ]
    foresight = Foresight(requests, lambda r: r.tokens, keep=4)
    for _ in range(200):
        lo, hi = sorted(rng.sample(range(301), 2))
        value, enough = rng.randint(1, 1000), rng.randint(1, 4)
        after = (START + timedelta(minutes=lo - 0.5)).timestamp()
        until = (START + timedelta(minutes=hi - 0.5)).timestamp()
        truth = sum(r.tokens > value for r in requests[lo:hi])

        assert foresight.dearer("five_hour", after, until, value, enough) == min(truth, enough)


def test_a_long_curve_is_thinned_to_at_most_500_points_keeping_both_ends():
    curve = tuple((START + timedelta(seconds=i), float(i)) for i in range(2000))
    kept = thinned(curve)

    assert len(kept) == 500
    assert kept[0] == curve[0] and kept[-1] == curve[-1]
    assert thinned(curve[:10]) == curve[:10]


def test_the_small_trace_solves_in_seconds_with_the_bounds_in_order():
    bounds = bounds_solve(small())

    assert 0 < bounds.lower_usd <= bounds.achievable_usd
    assert bounds.lower_seconds < 20
