"""The seeded traces: ``python -m bench.fleet.generate`` rewrites bench/fleet/traces/.

Three week-long traces over one fleet (four plans of three sizes, each with its own
reset phases and usage at the start; ten agents on Sonnet, Opus and Haiku):

- ``steady``: every agent's turns arrive at a constant rate all week.
- ``bursty``: a workday (08:00-19:00 UTC, busiest mid-morning and mid-afternoon) with
  night lulls and quiet weekends.
- ``revoked``: the steady load, with the plan ``max-b`` revoked mid-week (from then on
  it answers every request with an auth refusal).

Plus ``small``: one day, two plans, three agents: the trace the test suite runs.
Each is a pure function of its seed (``random.Random(seed)``): the same seed writes
the same file.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.fleet.trace import (
    PLAN_CAPACITY,
    AgentSpec,
    Fleet,
    SubscriptionSpec,
    Trace,
    Turn,
    WindowSpec,
    trace_write,
)
from simulator.state import WINDOW_DURATIONS

TRACES_DIR = Path(__file__).resolve().parent / "traces"
START = datetime(2030, 1, 7, tzinfo=UTC)  # a Monday
WEEK = timedelta(days=7)
SEEDS = {"steady": 11, "bursty": 23, "revoked": 37, "small": 5}
KEY_USD_PER_MTOK = 5.0
# Claude Code turns carry tens of kilobytes of context: a median of 25k tokens.
TOKENS_MEDIAN = 25_000
TOKENS_SIGMA = 0.8
TOKENS_MIN, TOKENS_MAX = 2_000, 400_000
TRIGGER_WEIGHTS = (("schedule", 40), ("api", 30), ("chat", 20), ("agent", 10))
SONNET, OPUS, HAIKU = "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"


def _window(
    rng: random.Random,
    name: str,
    capacity: int,
    *,
    weekly_reset: timedelta,
    weekly_used: float,
    start: datetime,
) -> WindowSpec:
    if name == "five_hour":
        reset = start + timedelta(seconds=rng.randint(600, WINDOW_DURATIONS[name]))
        used = rng.uniform(0.0, 0.5)
    else:
        # The family windows reset with the weekly one and are a little less used.
        reset = start + weekly_reset
        used = weekly_used if name == "seven_day" else weekly_used * 0.8
    return WindowSpec(capacity=capacity, first_reset=reset, used=int(capacity * used))


def _plan(
    rng: random.Random,
    name: str,
    plan_type: str,
    *,
    weekly_reset: timedelta,
    weekly_used: float,
    start: datetime = START,
    scale: float = 1.0,
) -> SubscriptionSpec:
    windows = {
        window: _window(
            rng,
            window,
            int(capacity * scale),
            weekly_reset=weekly_reset,
            weekly_used=weekly_used,
            start=start,
        )
        for window, capacity in PLAN_CAPACITY[plan_type].items()
    }
    return SubscriptionSpec(name=name, plan_type=plan_type, windows=windows)


def week_fleet(rng: random.Random, name: str, description: str, seed: int) -> Fleet:
    """Four plans whose weekly windows reset on different days, ten agents."""
    plans = (
        _plan(rng, "max-a", "max-20x", weekly_reset=timedelta(days=1, hours=12), weekly_used=0.6),
        _plan(rng, "max-b", "max-20x", weekly_reset=timedelta(days=4, hours=6), weekly_used=0.35),
        _plan(rng, "max5-c", "max-5x", weekly_reset=timedelta(days=2, hours=18), weekly_used=0.45),
        _plan(rng, "pro-d", "pro", weekly_reset=timedelta(days=5, hours=20), weekly_used=0.15),
    )
    models = (SONNET, SONNET, OPUS, SONNET, HAIKU, SONNET, OPUS, SONNET, HAIKU, SONNET)
    agents = tuple(
        AgentSpec(f"agent-{i + 1:02d}", model, plans[i % len(plans)].name)
        for i, model in enumerate(models)
    )
    return Fleet(
        name=name,
        start=START,
        end=START + WEEK,
        subscriptions=plans,
        agents=agents,
        key_usd_per_mtok=KEY_USD_PER_MTOK,
        seed=seed,
        description=description,
    )


def _tokens(rng: random.Random) -> int:
    value = rng.lognormvariate(math.log(TOKENS_MEDIAN), TOKENS_SIGMA)
    return int(min(max(value, TOKENS_MIN), TOKENS_MAX))


def _trigger(rng: random.Random) -> str:
    names = [name for name, _ in TRIGGER_WEIGHTS]
    weights = [weight for _, weight in TRIGGER_WEIGHTS]
    return rng.choices(names, weights)[0]


def _arrivals(
    rng: random.Random,
    fleet: Fleet,
    rates: dict[str, float],
    shape: Callable[[datetime], float],
) -> list[Turn]:
    """Poisson arrivals per agent at ``rate × shape(t)`` per hour (thinning; shape ≤ 1)."""
    turns: list[Turn] = []
    for agent in fleet.agents:
        rate = rates[agent.name]
        at = fleet.start
        while True:
            at += timedelta(hours=rng.expovariate(rate))
            if at >= fleet.end:
                break
            if rng.random() <= shape(at):
                at = at.replace(microsecond=0)
                turns.append(Turn(at, agent.name, _tokens(rng), _trigger(rng)))
    return sorted(turns, key=lambda t: (t.at, t.agent))


def _rates(rng: random.Random, fleet: Fleet, mean: float) -> dict[str, float]:
    return {a.name: mean * rng.uniform(0.55, 1.45) for a in fleet.agents}


def steady(seed: int = SEEDS["steady"]) -> Trace:
    rng = random.Random(seed)
    fleet = week_fleet(rng, "steady", "constant load all week", seed)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 1.45), lambda at: 1.0)
    return Trace(fleet, tuple(turns))


def _workday(at: datetime) -> float:
    """Load shape: weekdays 08:00-19:00 with two peaks, night lulls, quiet weekends."""
    hour = at.hour + at.minute / 60
    weekend = at.weekday() >= 5
    if 8 <= hour < 19:
        peak = max(math.exp(-((hour - 10.5) ** 2) / 2), math.exp(-((hour - 15) ** 2) / 2))
        level = 0.45 + 0.55 * peak
    else:
        level = 0.04
    return level * (0.2 if weekend else 1.0)


def bursty(seed: int = SEEDS["bursty"]) -> Trace:
    rng = random.Random(seed)
    fleet = week_fleet(rng, "bursty", "a workday with peaks, night lulls, quiet weekends", seed)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 6.0), _workday)
    return Trace(fleet, tuple(turns))


def revoked(seed: int = SEEDS["revoked"]) -> Trace:
    rng = random.Random(seed)
    fleet = week_fleet(rng, "revoked", "steady load; max-b revoked mid-week", seed)
    plans = tuple(
        replace(p, revoked_at=START + timedelta(days=3, hours=14)) if p.name == "max-b" else p
        for p in fleet.subscriptions
    )
    fleet = replace(fleet, subscriptions=plans)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 1.45), lambda at: 1.0)
    return Trace(fleet, tuple(turns))


def small(seed: int = SEEDS["small"]) -> Trace:
    """One day, two small plans (one revoked at 18:00), three agents: quotas bind."""
    rng = random.Random(seed)
    plans = (
        _plan(rng, "small-a", "pro", weekly_reset=timedelta(hours=14), weekly_used=0.6),
        _plan(rng, "small-b", "pro", weekly_reset=timedelta(days=3), weekly_used=0.4, scale=0.7),
    )
    plans = (plans[0], replace(plans[1], revoked_at=START + timedelta(hours=18)))
    agents = (
        AgentSpec("agent-1", SONNET, "small-a"),
        AgentSpec("agent-2", OPUS, "small-b"),
        AgentSpec("agent-3", HAIKU, "small-a"),
    )
    fleet = Fleet(
        name="small",
        start=START,
        end=START + timedelta(days=1),
        subscriptions=plans,
        agents=agents,
        key_usd_per_mtok=KEY_USD_PER_MTOK,
        seed=seed,
        description="one day, two plans (small-b revoked at 18:00), three agents",
    )
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 2.5), lambda at: 1.0)
    return Trace(fleet, tuple(turns))


GENERATORS: dict[str, Callable[[int], Trace]] = {
    "steady": steady,
    "bursty": bursty,
    "revoked": revoked,
}


def main(argv: list[str]) -> int:
    TRACES_DIR.mkdir(parents=True, exist_ok=True)
    for name, generate in GENERATORS.items():
        trace = generate(SEEDS[name])
        path = TRACES_DIR / f"{name}.jsonl"
        trace_write(trace, path)
        tokens = sum(t.tokens for t in trace.turns)
        print(f"{path.relative_to(Path.cwd())}: {len(trace.turns)} turns, {tokens / 1e6:.1f} Mtok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
