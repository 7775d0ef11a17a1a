"""The seeded traces: ``python -m bench.fleet.generate`` rewrites bench/fleet/traces/.

Three week-long traces over one fleet (four plans of three sizes, each with its own
reset phases and usage at the start; ten agents on Sonnet, Opus and Haiku):

- ``steady``: every agent's turns arrive at a constant rate all week.
- ``bursty``: a workday (08:00-19:00 UTC, busiest mid-morning and mid-afternoon) with
  night lulls and quiet weekends; the morning's design hours run on Opus.
- ``revoked``: the steady load, with the plan ``max-b`` revoked mid-week (from then on
  it answers every request with an auth refusal).

Three team weeks (``team-1``, ``team-2``, ``team-3``: ``team_week`` of three seeds):
people in two time zones on a workday with a lunch dip and a little weekend work,
Opus in their design hours, bots on cron (an hourly CI fixer and a triager on Haiku,
nightly batch runs with big turns, ...), a reviewer their turns call on; seven plans
of three sizes, one revoked mid-week and replaced by one added hours later, one
removed. ``team_week``'s docstring says what else.

Plus ``small``: one day, two plans, three agents: the trace the test suite runs.
Every turn is a Claude Code loop of requests (``_requests``), and every request
carries the prompt prefix it would read from the cache (``with_cache``): the agent's
system prompt and tools, then the turn's conversation so far. Each trace is a pure
function of its seed (``random.Random(seed)``): the same seed writes the same file.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from bench.fleet.trace import (
    LIST_PRICES,
    PLAN_CAPACITY,
    AgentSpec,
    Fleet,
    Request,
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
SEEDS = {
    "steady": 11,
    "bursty": 23,
    "revoked": 37,
    "small": 5,
    "team-1": 101,
    "team-2": 202,
    "team-3": 303,
}
KEY_USD_PER_MTOK = 5.0
TRIGGER_WEIGHTS = (("schedule", 40), ("api", 30), ("chat", 20), ("agent", 10))
SONNET, OPUS, HAIKU = "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"
# A turn the loop would take past this is cut short (Claude Code compacts its context
# or the run hits its budget): the heaviest turns of a real install are about this.
TURN_CAP = 1_500_000
MAX_REQUESTS = 30
# The prompt cache: an agent's system prompt and tool definitions (Claude Code's run
# 10-30k tokens), then the conversation, which Claude Code compacts near the context
# window's end (so a prefix never passes this).
SESSION_PREFIX = (10_000, 15_000, 30_000)  # fewest, median, most tokens
CONTEXT_CAP = 160_000
# Per trace, what a plan's windows count one cached token at: a read at up to the
# key's tenth, a write at its price to the key's 1.25 times (the providers do not
# say; each trace draws its own).
READ_WEIGHTS = (0.0, 0.1)
WRITE_WEIGHTS = (1.0, 1.25)


@dataclass(frozen=True)
class Loop:
    """The shape of one kind of turn: how many requests (lognormal around
    ``requests``) and how big the first is (lognormal around ``first``); each later
    request carries the context so far, ``growth`` of the first's size more each."""

    requests: float
    first: float
    growth: float = 0.15
    sigma: float = 0.7


CHAT = Loop(requests=5, first=2_700, growth=0.1)
SMALL_BOT = Loop(requests=2.5, first=2_000, growth=0.1)
BATCH = Loop(requests=22, first=8_000, sigma=0.4)
MEDIUM_BOT = Loop(requests=8, first=3_400, sigma=0.5)


def _requests(rng: random.Random, loop: Loop) -> tuple[Request, ...]:
    """One turn's requests: 1-30 of them, each a few to ~40 s after the one before
    (the tool calls between), sizes lognormal and growing with the context; the loop
    ends early rather than pass ``TURN_CAP``."""
    count = min(MAX_REQUESTS, max(1, round(rng.lognormvariate(math.log(loop.requests), 0.8))))
    first = rng.lognormvariate(math.log(loop.first), loop.sigma)
    requests: list[Request] = []
    offset, total = 0, 0
    for i in range(count):
        tokens = max(1, int(first * (1 + loop.growth * i) * rng.lognormvariate(0, 0.35)))
        if requests and total + tokens > TURN_CAP:
            break
        tokens = min(tokens, TURN_CAP)  # a first request this big is 9 sigma out or more
        requests.append(Request(float(offset), tokens))
        total += tokens
        offset += round(min(40.0, 2 + rng.expovariate(1 / 9)))
    return tuple(requests)


def _turn(
    rng: random.Random, at: datetime, agent: AgentSpec, loop: Loop, trigger: str, model: str
) -> Turn:
    """A turn of ``agent`` at ``at`` (whole seconds) on ``model``, shaped by ``loop``."""
    requests = _requests(rng, loop)
    override = model if model != agent.model else None
    at = at.replace(microsecond=0)
    return Turn(at, agent.name, sum(r.tokens for r in requests), trigger, override, requests)


def with_cache(trace: Trace) -> Trace:
    """``trace`` with the prompt cache: each agent's session prefix (lognormal around
    15k, 10-30k), each turn's first request reading it and each later request the
    prefix plus every fresh token the turn sent before (its context, up to
    ``CONTEXT_CAP``), and the trace's window weights for a cache read and a write.

    Drawn from a generator of its own (seeded by the trace's seed), so the turns and
    their fresh tokens are what the seed drew without the cache."""
    rng = random.Random(f"{trace.fleet.seed}:prompt-cache")
    weights = {
        "read": round(rng.uniform(*READ_WEIGHTS), 3),
        "write": round(rng.uniform(*WRITE_WEIGHTS), 3),
    }
    fewest, median, most = SESSION_PREFIX
    prefix = {
        agent.name: int(
            round(min(most, max(fewest, rng.lognormvariate(math.log(median), 0.3))), -2)
        )
        for agent in trace.fleet.agents
    }
    turns = []
    for turn in trace.turns:
        context, requests = prefix[turn.agent], []
        for request in turn.parts:
            requests.append(replace(request, cached=min(context, CONTEXT_CAP)))
            context += request.tokens
        turns.append(replace(turn, requests=tuple(requests)))
    return Trace(replace(trace.fleet, cache_weights=weights), tuple(turns))


def _fits(turn: Turn, fleet: Fleet) -> bool:
    """Whether the turn's last request falls before the trace ends (the format's rule)."""
    return turn.ends_at < fleet.end


# Plans and the fleet of the steady, bursty and revoked traces


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
    return _week(name, plans, agents, seed=seed, description=description)


def _week(
    name: str,
    plans: tuple[SubscriptionSpec, ...],
    agents: tuple[AgentSpec, ...],
    *,
    seed: int,
    description: str,
) -> Fleet:
    """A week-long fleet from the kept traces' start, the key at list prices."""
    return Fleet(
        name=name,
        start=START,
        end=START + WEEK,
        subscriptions=plans,
        agents=agents,
        key_usd_per_mtok=KEY_USD_PER_MTOK,
        seed=seed,
        description=description,
        key_prices=dict(LIST_PRICES),
    )


def plan_capacity(fleet: Fleet) -> int:
    """The tokens the plans' weekly windows can serve during the trace: what each had
    left when the trace starts (or when it is added), and its whole capacity again at
    each reset before it is revoked, removed or the trace ends. Demand above this
    must go to the key whatever the routing."""
    total = 0
    for plan in fleet.subscriptions:
        window = plan.windows["seven_day"]
        gone = min(t for t in (plan.revoked_at, plan.removed_at, fleet.end) if t is not None)
        if gone <= (plan.added_at or fleet.start):
            continue
        total += window.capacity - window.used
        reset = window.first_reset
        while reset < gone:
            total += window.capacity
            reset += WEEK
    return total


# Arrivals of the steady, bursty and revoked traces


def _trigger(rng: random.Random) -> str:
    names = [name for name, _ in TRIGGER_WEIGHTS]
    weights = [weight for _, weight in TRIGGER_WEIGHTS]
    return rng.choices(names, weights)[0]


def _model(rng: random.Random, agent: AgentSpec, opus_share: float) -> str:
    """The turn's model: a Sonnet agent's turn is overridden to Opus at ``opus_share``."""
    return OPUS if agent.model == SONNET and rng.random() < opus_share else agent.model


def _arrivals(
    rng: random.Random,
    fleet: Fleet,
    rates: dict[str, float],
    shape: Callable[[datetime], float],
    opus_share: Callable[[datetime], float],
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
                model = _model(rng, agent, opus_share(at))
                turn = _turn(rng, at, agent, CHAT, _trigger(rng), model)
                if _fits(turn, fleet):
                    turns.append(turn)
    return sorted(turns, key=lambda t: (t.at, t.agent))


def _rates(rng: random.Random, fleet: Fleet, mean: float) -> dict[str, float]:
    return {a.name: mean * rng.uniform(0.55, 1.45) for a in fleet.agents}


def _flat(at: datetime) -> float:
    return 1.0


def _now_and_then(at: datetime) -> float:
    """One Sonnet turn in twenty asks for Opus (``/model opus`` for a hard step)."""
    return 0.05


def steady(seed: int = SEEDS["steady"]) -> Trace:
    rng = random.Random(seed)
    fleet = week_fleet(rng, "steady", "constant load all week", seed)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 1.17), _flat, _now_and_then)
    return with_cache(Trace(fleet, tuple(turns)))


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


def _design_hours(at: datetime) -> float:
    """Mornings 09:00-11:00 are for design and review, mostly on Opus."""
    return 0.5 if 9 <= at.hour < 11 else 0.05


def bursty(seed: int = SEEDS["bursty"]) -> Trace:
    rng = random.Random(seed)
    description = "a workday with peaks, night lulls, quiet weekends; Opus mornings"
    fleet = week_fleet(rng, "bursty", description, seed)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 5.0), _workday, _design_hours)
    return with_cache(Trace(fleet, tuple(turns)))


def revoked(seed: int = SEEDS["revoked"]) -> Trace:
    rng = random.Random(seed)
    fleet = week_fleet(rng, "revoked", "steady load; max-b revoked mid-week", seed)
    plans = tuple(
        replace(p, revoked_at=START + timedelta(days=3, hours=14)) if p.name == "max-b" else p
        for p in fleet.subscriptions
    )
    fleet = replace(fleet, subscriptions=plans)
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 0.85), _flat, _now_and_then)
    return with_cache(Trace(fleet, tuple(turns)))


def small(seed: int = SEEDS["small"]) -> Trace:
    """One day, two small plans (one revoked at 18:00), three agents: quotas bind.

    The plans are Max 5x seats cut to 60 % and 42 % (the sizes the suite was written
    against), so a day of three agents runs into them without drowning them."""
    rng = random.Random(seed)
    plans = (
        _plan(
            rng,
            "small-a",
            "max-5x",
            weekly_reset=timedelta(hours=14),
            weekly_used=0.6,
            scale=0.6,
        ),
        _plan(
            rng, "small-b", "max-5x", weekly_reset=timedelta(days=3), weekly_used=0.4, scale=0.42
        ),
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
        key_prices=dict(LIST_PRICES),
    )
    turns = _arrivals(rng, fleet, _rates(rng, fleet, 2.0), _flat, _now_and_then)
    return with_cache(Trace(fleet, tuple(turns)))


# The team week

# Hours from UTC in January (CET, EST): the two offices' workdays overlap 14-17 UTC.
ZONES = {"eu": 1, "us": -5}
# (zone, person, their agents, the model their agents run on)
PEOPLE = (
    ("eu", "ada", 2, SONNET),
    ("eu", "bo", 2, SONNET),
    ("eu", "cem", 1, OPUS),
    ("eu", "dag", 2, SONNET),
    ("eu", "eli", 1, SONNET),
    ("us", "fay", 2, SONNET),
    ("us", "gus", 2, SONNET),
    ("us", "hal", 1, OPUS),
    ("us", "ivy", 2, SONNET),
)
INTERACTIVE_RATE = 2.8  # turns per hour per agent at the workday's peak
REVIEW_SHARE = 0.08  # of interactive turns, followed by a review from the reviewer
WEEKDAYS, EVERY_DAY = (0, 1, 2, 3, 4), (0, 1, 2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Cron:
    """A bot's schedule: at each (hour, minute) UTC on ``days``, ``runs`` turns."""

    agent: str
    loop: Loop
    times: tuple[tuple[int, int], ...]
    days: tuple[int, ...] = EVERY_DAY
    runs: int = 1


# The bots, their models, and their crons (the reviewer has none: turns call on it).
BOTS = {
    "ci-fix": HAIKU,
    "triage": HAIKU,
    "nightly": SONNET,
    "docs": HAIKU,
    "deps": SONNET,
    "release": SONNET,
    "reviewer": OPUS,
}
CRONS = (
    Cron("ci-fix", SMALL_BOT, tuple((h, 17) for h in range(24))),
    Cron("triage", SMALL_BOT, tuple((h, m) for h in range(7, 23) for m in (0, 30)), WEEKDAYS),
    Cron("nightly", BATCH, ((2, 0),), runs=2),
    Cron("docs", MEDIUM_BOT, ((3, 30),)),
    Cron("deps", MEDIUM_BOT, ((6, 0),), WEEKDAYS),
    Cron("release", BATCH, ((15, 0),), (4,)),
)


def _local(at: datetime, zone: str) -> datetime:
    return at + timedelta(hours=ZONES[zone])


def _office_hours(local: datetime) -> float:
    """Load shape in local time: 09-18 busiest mid-morning and mid-afternoon, a lunch
    dip, a little before and after; weekends a tenth of it."""
    hour = local.hour + local.minute / 60
    if 12 <= hour < 13:
        level = 0.3
    elif 9 <= hour < 18:
        peak = max(math.exp(-((hour - 10.5) ** 2) / 2), math.exp(-((hour - 15.5) ** 2) / 2))
        level = 0.55 + 0.45 * peak
    elif 7.5 <= hour < 9 or 18 <= hour < 21:
        level = 0.12
    else:
        level = 0.01
    return level * (0.1 if local.weekday() >= 5 else 1.0)


def _person_model(rng: random.Random, agent: AgentSpec, local: datetime) -> str:
    """Design and review hours (09-11 local) mostly on Opus; an Opus agent's quick
    turns at other hours now and then on Sonnet."""
    if 9 <= local.hour < 11:
        return OPUS if rng.random() < 0.5 else agent.model
    if agent.model == OPUS:
        return SONNET if rng.random() < 0.3 else OPUS
    return OPUS if rng.random() < 0.05 else agent.model


def _people_turns(rng: random.Random, fleet: Fleet, zones: dict[str, str]) -> Iterator[Turn]:
    """Each person's agents: Poisson turns on their office hours (thinning)."""
    for agent in fleet.agents:
        zone = zones.get(agent.name)
        if zone is None:
            continue
        rate = INTERACTIVE_RATE * rng.uniform(0.6, 1.4)
        at = fleet.start
        while (at := at + timedelta(hours=rng.expovariate(rate))) < fleet.end:
            local = _local(at, zone)
            if rng.random() <= _office_hours(local):
                trigger = "chat" if rng.random() < 0.65 else "api"
                yield _turn(rng, at, agent, CHAT, trigger, _person_model(rng, agent, local))


def _reviews(rng: random.Random, fleet: Fleet, turns: list[Turn]) -> Iterator[Turn]:
    """Some interactive turns ask the reviewer for a review when they end."""
    reviewer = fleet.agent("reviewer")
    for turn in turns:
        if turn.trigger in ("chat", "api") and rng.random() < REVIEW_SHARE:
            at = turn.ends_at + timedelta(seconds=rng.uniform(20, 300))
            yield _turn(rng, at, reviewer, MEDIUM_BOT, "agent", reviewer.model)


def _cron_turns(rng: random.Random, fleet: Fleet, crons: tuple[Cron, ...]) -> Iterator[Turn]:
    """Each cron's turns, at its minutes plus the few seconds a dispatch takes."""
    agents = {a.name: a for a in fleet.agents}
    days = (fleet.end - fleet.start).days
    for cron in crons:
        for day in range(days):
            midnight = fleet.start + timedelta(days=day)
            if midnight.weekday() not in cron.days:
                continue
            for hour, minute in cron.times:
                at = midnight + timedelta(hours=hour, minutes=minute)
                for _ in range(cron.runs):
                    jitter = timedelta(seconds=rng.randint(0, 20))
                    agent = agents[cron.agent]
                    yield _turn(rng, at + jitter, agent, cron.loop, "schedule", agent.model)


def _sweeps(zones: dict[str, str]) -> tuple[Cron, ...]:
    """Each person's first agent sweeps their inbox on a weekday cron (08:50 and 13:50
    local): its turns can run while their chats do."""
    return tuple(
        Cron(name, MEDIUM_BOT, tuple(((h - ZONES[zone]) % 24, 50) for h in (8, 13)), WEEKDAYS)
        for name, zone in zones.items()
        if name.endswith("-1")
    )


def _weekly_reset(rng: random.Random, day: int) -> tuple[timedelta, float]:
    """A weekly reset ``day`` days and some hours in, and the share used by the start:
    the part of its week gone by, spent at the plan's own pace."""
    reset = timedelta(days=day, hours=rng.randint(0, 23), minutes=rng.choice((0, 15, 30, 45)))
    reset = max(reset, timedelta(hours=3))
    return reset, (1 - reset / WEEK) * rng.uniform(0.5, 0.95)


def _fresh(name: str, plan_type: str, added_at: datetime) -> SubscriptionSpec:
    """A plan registered at ``added_at`` with nothing used: its windows from then."""
    windows = {
        window: WindowSpec(capacity, added_at + timedelta(seconds=WINDOW_DURATIONS[window]))
        for window, capacity in PLAN_CAPACITY[plan_type].items()
    }
    return SubscriptionSpec(name, plan_type, windows, added_at=added_at)


def _team_plans(rng: random.Random) -> tuple[SubscriptionSpec, ...]:
    """Six plans from the start (two Max 20x, two Max 5x, two Pro), weekly resets on
    six different days; ``max5-c`` revoked on Tuesday to Thursday and replaced by
    ``max5-e`` hours later; ``pro-g`` removed on Friday."""
    kinds = (
        ("max-a", "max-20x"),
        ("max-b", "max-20x"),
        ("max5-c", "max-5x"),
        ("max5-d", "max-5x"),
        ("pro-f", "pro"),
        ("pro-g", "pro"),
    )
    days = rng.sample(range(7), len(kinds))
    plans = []
    for (name, plan_type), day in zip(kinds, days, strict=True):
        reset, used = _weekly_reset(rng, day)
        plans.append(_plan(rng, name, plan_type, weekly_reset=reset, weekly_used=used))
    revoked_at = START + timedelta(days=rng.choice((1, 2, 3)), hours=rng.uniform(9, 16))
    added_at = revoked_at + timedelta(hours=rng.uniform(2, 8))
    removed_at = START + timedelta(days=4, hours=rng.uniform(10, 16))
    plans[2] = replace(plans[2], revoked_at=revoked_at.replace(microsecond=0))
    plans[5] = replace(plans[5], removed_at=removed_at.replace(microsecond=0))
    return (*plans, _fresh("max5-e", "max-5x", added_at.replace(microsecond=0)))


def _team_fleet(rng: random.Random, seed: int, name: str) -> tuple[Fleet, dict[str, str]]:
    """The team's fleet and each person's agent's zone."""
    plans = _team_plans(rng)
    zones: dict[str, str] = {}
    models = dict(BOTS)
    for zone, person, count, model in PEOPLE:
        for i in range(count):
            zones[f"{zone}-{person}-{i + 1}"] = zone
            models[f"{zone}-{person}-{i + 1}"] = model
    # Agents start spread over the plans present then, about by their size.
    slots = (
        "max-a",
        "max-b",
        "max5-c",
        "max-a",
        "max-b",
        "max5-d",
        "max-a",
        "max-b",
        "pro-f",
        "max-a",
        "max-b",
        "pro-g",
    )
    names = sorted(models)
    rng.shuffle(names)
    agents = tuple(
        AgentSpec(name, models[name], slots[i % len(slots)]) for i, name in enumerate(names)
    )
    description = (
        "a team week: two offices (UTC+1, UTC-5), bots on cron, Opus design hours; "
        "max5-c revoked and max5-e added mid-week, pro-g removed"
    )
    return _week(name, plans, agents, seed=seed, description=description), zones


def team_week(seed: int, name: str | None = None) -> Trace:
    """A week of a team of nine in two offices and seven bots on seven plans.

    People (``eu-*`` on UTC+1, ``us-*`` on UTC-5) chat with their agents on office
    hours (``_office_hours``), on Opus in their design hours; each one's first agent
    also sweeps on a cron, so its turns overlap their chats. Bots: ``ci-fix`` hourly
    and ``triage`` half-hourly on weekdays (Haiku, small turns), ``nightly`` two big
    batch runs at 02:00 UTC, ``docs`` at 03:30, ``deps`` at 06:00 on weekdays,
    ``release`` on Friday 15:00; ``reviewer`` (Opus) reviews some turns when they end.
    """
    rng = random.Random(seed)
    fleet, zones = _team_fleet(rng, seed, name or f"team-{seed}")
    people = list(_people_turns(rng, fleet, zones))
    turns = [
        *people,
        *_reviews(rng, fleet, people),
        *_cron_turns(rng, fleet, CRONS + _sweeps(zones)),
    ]
    kept = (t for t in turns if _fits(t, fleet))
    return with_cache(Trace(fleet, tuple(sorted(kept, key=lambda t: (t.at, t.agent)))))


GENERATORS: dict[str, Callable[[int], Trace]] = {
    "steady": steady,
    "bursty": bursty,
    "revoked": revoked,
    "team-1": partial(team_week, name="team-1"),
    "team-2": partial(team_week, name="team-2"),
    "team-3": partial(team_week, name="team-3"),
}


def main(argv: list[str]) -> int:
    TRACES_DIR.mkdir(parents=True, exist_ok=True)
    for name, generate in GENERATORS.items():
        trace = generate(SEEDS[name])
        path = TRACES_DIR / f"{name}.jsonl"
        trace_write(trace, path)
        tokens = sum(t.tokens for t in trace.turns)
        cached = sum(r.cached for t in trace.turns for r in t.parts)
        requests = sum(len(t.parts) for t in trace.turns)
        ratio = tokens / plan_capacity(trace.fleet)
        print(
            f"{path.relative_to(Path.cwd())}: {len(trace.turns)} turns, {requests} requests, "
            f"{tokens / 1e6:.1f} Mtok fresh ({ratio:.2f} x what the plans can serve), "
            f"{cached / 1e6:.1f} Mtok cached prefix, cache weights {trace.fleet.cache_weights}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
