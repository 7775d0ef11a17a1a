"""Held-out traces: generator families whose every parameter is drawn from a range.

The kept traces (``generate.py``) are what this project's placement rules were tuned
on; these are traces it never saw. Each family is a function ``draw(rng) -> Trace`` of
a numpy ``Generator`` and differs from the others by the shape of its load:

- ``flat``: every agent at a constant rate all week.
- ``diurnal-one-office``: people on one office's hours (a UTC offset drawn), busiest
  mid-morning and mid-afternoon, a lunch dip, quiet nights and weekends.
- ``diurnal-two-offices``: two offices at least four hours apart, agents split.
- ``bursty``: a low base rate and bursts (20 min to 3 h, 5-20 a week) in which a
  share of the agents work at their peak rate together.
- ``cron``: bots on schedules (every 15 min to daily, on shared minutes, so they
  start together) beside people on one office's hours.

Shared by all (``RANGES``): 3-12 plans of 1-3 sizes (Pro, Max 5x, Max 20x, whose
capacities are in the ratios they are sold at, ``trace.PLAN_CAPACITY``), each with its
own weekly reset and usage at the start; 5-60 agents on a drawn mix of model
families (Sonnet agents' turns now and then on Opus); demand 0.8-1.4 x what the plans
can serve (``demand_ratio``); some plans revoked, added or removed mid-week; turns of
one request (version 1's shape) or Claude Code loops of several (version 2) whose
requests read the growing context from the prompt cache (version 3's ``cached``,
with per-trace cache weights); the key at list prices per model family or at one
flat price. Sizes are bounded (``Limits``: 200-2,500 turns, 12,000 requests) so that a
run of every policy over one trace takes seconds.

``holdout_trace(seed, index)`` is trace ``index`` of a run's ``seed``: family
``FAMILY_NAMES[index % 5]``, drawn from ``default_rng([seed, index])`` and named
``<family>-<index>-s<seed>``, so a name is enough to draw it again
(``trace_named``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np

from bench.fleet.generate import HAIKU, OPUS, SONNET, START, TURN_CAP
from bench.fleet.generate import MAX_REQUESTS as MAX_TURN_REQUESTS
from bench.fleet.trace import (
    DEFAULT_CACHE_WEIGHTS,
    LIST_PRICES,
    PLAN_CAPACITY,
    AgentSpec,
    Fleet,
    Request,
    SubscriptionSpec,
    Trace,
    Turn,
    WindowSpec,
)
from simulator.state import FAMILY_WINDOW, WINDOW_DURATIONS, model_family

WEEK = timedelta(days=7)
MINUTES = 7 * 24 * 60  # the week on a one-minute grid (the arrival intensities)
SOLD = ("pro", "max-5x", "max-20x")  # the sizes, 1 : 5 : 20
MODELS = (SONNET, OPUS, HAIKU)


@dataclass(frozen=True)
class Ranges:
    """What a held-out trace is drawn from (inclusive bounds)."""

    plans: tuple[int, int] = (3, 12)
    sizes: tuple[int, int] = (1, 3)
    agents: tuple[int, int] = (5, 60)
    demand: tuple[float, float] = (0.8, 1.4)
    # Flat key price, $ per Mtok, when the key is not at list prices per family.
    flat_price: tuple[float, float] = (2.0, 15.0)
    # What a plan's windows count a cached token at (``generate.with_cache``'s ranges).
    cache_read: tuple[float, float] = (0.0, 0.1)
    cache_write: tuple[float, float] = (1.0, 1.25)
    # An agent's session prefix (system prompt and tools): fewest, median, most tokens.
    prefix: tuple[int, int, int] = (10_000, 15_000, 30_000)


RANGES = Ranges()


@dataclass(frozen=True)
class Limits:
    """How many turns a trace has (about demand over a typical turn, within
    [``min_turns``, ``turns``]) and at most how many requests."""

    turns: int = 2_500
    requests: int = 12_000
    min_turns: int = 200


LIMITS = Limits()
# A turn counts about this many tokens (lognormal around it): with the plans' weekly
# capacity and the demand drawn it sets how many turns the week has.
TYPICAL_TURN_TOKENS = 60_000
ONE_REQUEST_SHARE = 0.3  # traces whose turns are one request each (version 1's shape)
LIST_PRICE_SHARE = 0.6  # traces whose key is at list prices per family (else flat)
REVOKE_SHARE, ADD_SHARE, REMOVE_SHARE = 0.35, 0.35, 0.3
# Turns whose model is not their agent's: a Sonnet agent's hard steps on Opus.
OPUS_OVERRIDE = (0.0, 0.15)
# Claude Code compacts its context near the window's end: no prefix passes this, and
# no request sends more fresh tokens than this.
CONTEXT_CAP = 160_000
REQUEST_CAP = 200_000


@dataclass(frozen=True)
class Loop:
    """A kind of turn: requests (lognormal around ``requests``, at most 30) and the
    fresh tokens of each (lognormal around ``fresh``, in relative units: the trace
    scales them to its demand)."""

    requests: float
    fresh: float


CHAT = Loop(requests=5, fresh=2_700)
SMALL_BOT = Loop(requests=2.5, fresh=2_000)
MEDIUM_BOT = Loop(requests=8, fresh=3_400)
BATCH = Loop(requests=22, fresh=6_000)


@dataclass(frozen=True)
class Profile:
    """One agent as the arrivals see it: its loop and the triggers it runs under."""

    loop: Loop
    triggers: tuple[str, ...]
    weights: tuple[float, ...]


PERSON = Profile(CHAT, ("chat", "api", "public"), (0.6, 0.3, 0.1))
WORKER = Profile(MEDIUM_BOT, ("agent", "mcp", "api"), (0.5, 0.2, 0.3))


@dataclass(frozen=True)
class Draft:
    """A turn before its tokens are scaled: instant (seconds from the start), agent,
    trigger, model, request offsets, fresh sizes in relative units, and the agent's
    session prefix in tokens (None: one request, nothing cached)."""

    at: float
    agent: int
    trigger: str
    model: str
    offsets: tuple[float, ...]
    fresh: tuple[float, ...]
    prefix: int | None


# Plans


def _minutes(rng: np.random.Generator, low: float, high: float) -> timedelta:
    """A span drawn uniformly in [low, high) hours, in whole minutes."""
    return timedelta(minutes=int(rng.integers(round(low * 60), round(high * 60))))


def _plan(rng: np.random.Generator, name: str, plan_type: str) -> SubscriptionSpec:
    """A plan present from the start: its weekly reset some days in, used at its own
    pace so far; its family windows reset with the weekly one and are a little less
    used; its 5-hour window anywhere in its period."""
    weekly_reset = max(_minutes(rng, 0, 7 * 24), timedelta(hours=3))
    weekly_used = (1 - weekly_reset / WEEK) * rng.uniform(0.3, 0.95)
    family_used = weekly_used * rng.uniform(0.5, 0.9)
    windows = {}
    for window, capacity in PLAN_CAPACITY[plan_type].items():
        if window == "five_hour":
            reset = START + _minutes(rng, 10 / 60, 5)
            used = rng.uniform(0.0, 0.5)
        else:
            reset = START + weekly_reset
            used = weekly_used if window == "seven_day" else family_used
        windows[window] = WindowSpec(capacity, reset, int(capacity * used))
    return SubscriptionSpec(name, plan_type, windows)


def _fresh_plan(name: str, plan_type: str, added_at: datetime) -> SubscriptionSpec:
    """A plan registered at ``added_at`` with nothing used: its windows from then."""
    windows = {
        window: WindowSpec(capacity, added_at + timedelta(seconds=WINDOW_DURATIONS[window]))
        for window, capacity in PLAN_CAPACITY[plan_type].items()
    }
    return SubscriptionSpec(name, plan_type, windows, added_at=added_at)


def _plans(rng: np.random.Generator) -> tuple[SubscriptionSpec, ...]:
    """3-12 plans of 1-3 sizes (each size drawn at least once); some of them added
    mid-week (always three or more from the start); some revoked (one may be replaced
    hours later by a plan of its size), one removed; two or more stay untouched."""
    count = int(rng.integers(RANGES.plans[0], RANGES.plans[1] + 1))
    sizes = int(rng.integers(RANGES.sizes[0], min(RANGES.sizes[1], count) + 1))
    kinds = [str(k) for k in rng.choice(SOLD, size=sizes, replace=False)]
    types = kinds + [str(k) for k in rng.choice(kinds, size=count - sizes)]
    rng.shuffle(types)
    added = 0
    if count > 3 and rng.random() < ADD_SHARE:
        added = int(rng.integers(1, min(2, count - 3) + 1))
    start = count - added
    plans = [_plan(rng, f"plan-{i + 1:02d}-{types[i]}", types[i]) for i in range(start)]
    for i in range(start, count):
        at = START + _minutes(rng, 12, 6 * 24)
        plans.append(_fresh_plan(f"plan-{i + 1:02d}-{types[i]}", types[i], at))
    touchable = list(rng.permutation(start))[: max(0, start - 2)]
    if touchable and rng.random() < REVOKE_SHARE:
        revoked = int(touchable.pop())
        at = START + _minutes(rng, 12, int(6.5 * 24))
        plans[revoked] = replace(plans[revoked], revoked_at=at)
        if len(plans) < RANGES.plans[1] and rng.random() < 0.5:
            kind = plans[revoked].plan_type
            later = min(at + _minutes(rng, 1, 12), START + WEEK - timedelta(hours=1))
            plans.append(_fresh_plan(f"plan-{len(plans) + 1:02d}-{kind}", kind, later))
    if touchable and rng.random() < REMOVE_SHARE:
        removed = int(touchable.pop())
        at = START + _minutes(rng, 24, int(6.5 * 24))
        plans[removed] = replace(plans[removed], removed_at=at)
    return tuple(plans)


# Agents


def _mix(rng: np.random.Generator) -> np.ndarray:
    """The share of agents on Sonnet, Opus and Haiku: mostly Sonnet, at times mostly
    Opus or Haiku."""
    alpha = [(4.0, 1.0, 1.0), (1.0, 3.0, 1.0), (1.5, 0.5, 3.0), (1.0, 1.0, 1.0)]
    return rng.dirichlet(alpha[int(rng.integers(len(alpha)))])


def _agents(
    rng: np.random.Generator, plans: tuple[SubscriptionSpec, ...], count: int
) -> tuple[AgentSpec, ...]:
    """``count`` agents on the drawn model mix, spread over the plans present at the
    start (more on bigger plans, by a drawn power of their capacity). Every agent has
    a plan: one on none runs on the key by the operator's choice, which no routing
    should undo."""
    mix = _mix(rng)
    present = [p for p in plans if p.present(START)]
    capacity = np.array([p.windows["seven_day"].capacity for p in present], dtype=float)
    weights = capacity ** rng.uniform(0.0, 1.0)
    weights /= weights.sum()
    agents = []
    for i in range(count):
        model = MODELS[int(rng.choice(3, p=mix))]
        plan = present[int(rng.choice(len(present), p=weights))]
        agents.append(AgentSpec(f"agent-{i + 1:02d}", model, plan.name))
    return tuple(agents)


# Arrival intensities on the one-minute grid (each row at most 1: the agent's peak)


def _grid() -> np.ndarray:
    return np.arange(MINUTES, dtype=float) / 60.0  # hours from the start (a Monday)


def _office(hours: np.ndarray, offset: int, weekend: float) -> np.ndarray:
    """One office's load in its local time (UTC + ``offset`` h): 09-18 busiest at 10:30
    and 15:30, a lunch dip at 12, a little before and after, weekends ``weekend`` of
    it."""
    local = hours + offset
    hour = np.mod(local, 24.0)
    day = np.mod(np.floor(local / 24.0), 7)
    peak = np.maximum(np.exp(-((hour - 10.5) ** 2) / 2), np.exp(-((hour - 15.5) ** 2) / 2))
    level = np.where((hour >= 9) & (hour < 18), 0.55 + 0.45 * peak, 0.01)
    level = np.where((hour >= 12) & (hour < 13), 0.3, level)
    level = np.where(((hour >= 7.5) & (hour < 9)) | ((hour >= 18) & (hour < 21)), 0.12, level)
    return level * np.where(day >= 5, weekend, 1.0)


def _zone(rng: np.random.Generator) -> int:
    return int(rng.integers(-8, 10))


def _flat_levels(rng: np.random.Generator, agents: int) -> np.ndarray:
    return np.ones((agents, MINUTES))


def _one_office_levels(rng: np.random.Generator, agents: int) -> np.ndarray:
    level = _office(_grid(), _zone(rng), rng.uniform(0.05, 0.2))
    return np.tile(level, (agents, 1))


def _two_office_levels(rng: np.random.Generator, agents: int) -> np.ndarray:
    first = _zone(rng)
    second = first + int(rng.choice([-1, 1])) * int(rng.integers(4, 10))
    second = (second + 12) % 24 - 12  # the same hours apart, as UTC-12..UTC+11
    weekend = rng.uniform(0.05, 0.2)
    share = rng.uniform(0.3, 0.7)
    offices = (_office(_grid(), first, weekend), _office(_grid(), second, weekend))
    return np.stack([offices[0] if rng.random() < share else offices[1] for _ in range(agents)])


def _bursty_levels(rng: np.random.Generator, agents: int) -> np.ndarray:
    """A base level, and bursts each of which a share of the agents join at peak."""
    levels = np.full((agents, MINUTES), rng.uniform(0.03, 0.2))
    for _ in range(int(rng.poisson(rng.uniform(5, 20))) or 1):
        begin = int(rng.integers(MINUTES))
        length = int(rng.integers(20, 181))
        joined = rng.random(agents) < rng.uniform(0.3, 1.0)
        levels[joined, begin : begin + length] = 1.0
    return levels


# Turns


def _trigger(rng: np.random.Generator, profile: Profile) -> str:
    return profile.triggers[int(rng.choice(len(profile.triggers), p=profile.weights))]


def _loop(
    rng: np.random.Generator, loop: Loop, one_request: bool
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """One turn's request offsets and fresh sizes: requests a few to 40 s apart (the
    tool calls between), each growing a little with the context; a one-request turn
    is all of it at once."""
    count = min(MAX_TURN_REQUESTS, max(1, round(rng.lognormal(math.log(loop.requests), 0.8))))
    first = rng.lognormal(math.log(loop.fresh), 0.6)
    fresh = first * (1 + 0.1 * np.arange(count)) * rng.lognormal(0.0, 0.35, size=count)
    if one_request:
        return (0.0,), (float(fresh.sum()),)
    gaps = np.round(np.minimum(40.0, 2 + rng.exponential(9.0, size=count - 1)))
    offsets = np.concatenate(([0.0], np.cumsum(gaps)))
    return tuple(offsets.tolist()), tuple(fresh.tolist())


def _prefix(rng: np.random.Generator) -> int:
    """An agent's session prefix: lognormal around the median, clipped, in hundreds."""
    fewest, median, most = RANGES.prefix
    drawn = rng.lognormal(math.log(median), 0.3)
    return int(round(min(most, max(fewest, drawn)), -2))


def _sizes(draft: Draft, factor: float) -> tuple[list[int], list[int]]:
    """The draft's fresh tokens at ``factor`` and each request's cached prefix: the
    session prefix, then every fresh token the turn sent before (up to
    ``CONTEXT_CAP``). A request sends at most ``REQUEST_CAP`` fresh tokens, and a turn
    stops growing at ``generate.TURN_CAP`` (the heaviest turns of a real install):
    scaled demand lands in the turns below the caps, not in a few monsters that no
    plan's 5-hour window holds."""
    fresh, total = [], 0
    for size in draft.fresh:
        cap = REQUEST_CAP if draft.prefix is not None else TURN_CAP
        tokens = max(1, min(round(size * factor), cap, TURN_CAP - total))
        fresh.append(tokens)
        total += tokens
    if draft.prefix is None:
        return fresh, [0] * len(fresh)
    cached, context = [], draft.prefix
    for tokens in fresh:
        cached.append(min(context, CONTEXT_CAP))
        context += tokens
    return fresh, cached


def _model(rng: np.random.Generator, agent: AgentSpec, opus: float) -> str:
    return OPUS if agent.model == SONNET and rng.random() < opus else agent.model


def _poisson(rng: np.random.Generator, levels: np.ndarray, turns: float) -> list[tuple[float, int]]:
    """Inhomogeneous Poisson arrivals, agent a at ``rate[a] × levels[a]`` per minute,
    rates drawn per agent and scaled so that about ``turns`` arrive in all."""
    weights = rng.lognormal(0.0, 0.5, size=levels.shape[0])
    mass = levels.sum(axis=1)
    expected = weights * mass
    scale = turns / expected.sum() if expected.sum() > 0 else 0.0
    arrivals: list[tuple[float, int]] = []
    for agent in range(levels.shape[0]):
        if mass[agent] <= 0:
            continue
        n = int(rng.poisson(scale * expected[agent]))
        minutes = rng.choice(MINUTES, size=n, p=levels[agent] / mass[agent])
        seconds = minutes * 60.0 + rng.uniform(0, 60, size=n)
        arrivals.extend((float(np.floor(s)), agent) for s in seconds)
    return arrivals


@dataclass(frozen=True)
class Cron:
    """A bot's schedule: every ``period`` minutes from ``minute`` past midnight UTC on
    weekdays or every day."""

    agent: int
    period: int
    minute: int
    weekdays_only: bool
    loop: Loop


def _crons(rng: np.random.Generator, bots: list[int], budget: float) -> list[Cron]:
    """Each bot's schedule: periods of 15 min to a day on the shared minutes :00,
    :30 and :17 (so bots start together); longer periods run bigger turns. Periods
    double, most frequent first, until the crons' turns fit ``budget``."""
    periods = [15, 30, 60, 120, 240, 1440]
    crons = []
    for agent in bots:
        period = int(rng.choice(periods, p=[0.1, 0.15, 0.3, 0.15, 0.1, 0.2]))
        loop = BATCH if period >= 1440 else SMALL_BOT if period <= 60 else MEDIUM_BOT
        minute = int(rng.choice([0, 0, 30, 17])) % period
        if period == 1440:
            minute = int(rng.integers(0, 24)) * 60 + minute
        crons.append(Cron(agent, period, minute, bool(rng.random() < 0.4), loop))

    def runs(cron: Cron) -> float:
        return (5 if cron.weekdays_only else 7) * 1440 / cron.period

    while sum(runs(c) for c in crons) > budget:
        busiest = max(range(len(crons)), key=lambda i: (runs(crons[i]), -i))
        if crons[busiest].period >= 1440:
            break
        crons[busiest] = replace(crons[busiest], period=crons[busiest].period * 2)
    return crons


def _cron_arrivals(rng: np.random.Generator, crons: list[Cron]) -> list[tuple[float, int]]:
    arrivals = []
    for cron in crons:
        for day in range(7):
            if cron.weekdays_only and day >= 5:
                continue
            for minute in range(cron.minute, 1440, cron.period):
                jitter = int(rng.integers(0, 21))  # the seconds a dispatch takes
                arrivals.append((float((day * 1440 + minute) * 60 + jitter), cron.agent))
    return arrivals


# Demand against what the plans can serve


def _weekly(fleet: Fleet, window: str) -> int:
    """Tokens ``window`` of every plan can serve during the trace: what it had left
    at the start (or when added), its whole capacity again at each reset before it is
    revoked, removed or the trace ends."""
    total = 0
    for plan in fleet.subscriptions:
        spec = plan.windows[window]
        gone = min(t for t in (plan.revoked_at, plan.removed_at, fleet.end) if t is not None)
        if gone <= (plan.added_at or fleet.start):
            continue
        total += spec.capacity - spec.used
        reset = spec.first_reset
        while reset < gone:
            total += spec.capacity
            reset += WEEK
    return total


def _five_hour(fleet: Fleet) -> np.ndarray:
    """Per 5-hour slot from the start, the 5-hour capacity of the plans usable at its
    start."""
    slots = math.ceil((fleet.end - fleet.start) / timedelta(hours=5))
    capacity = np.zeros(slots)
    for s in range(slots):
        at = fleet.start + s * timedelta(hours=5)
        capacity[s] = sum(
            p.windows["five_hour"].capacity
            for p in fleet.subscriptions
            if p.present(at) and (p.revoked_at is None or at < p.revoked_at)
        )
    return capacity


@dataclass(frozen=True)
class Demand:
    """Every request's instant (s from the start), family and counted tokens (its
    fresh tokens and its cached prefix read warm, at the trace's read weight)."""

    at: np.ndarray
    family: np.ndarray  # 0 sonnet, 1 opus, 2 other
    counted: np.ndarray


def _family_index(model: str) -> int:
    family = model_family(model)
    return 0 if family == "sonnet" else 1 if family == "opus" else 2


# The busiest quarter of the week's 5-hour slots make its peak: about a workday's
# office hours of one office (the very busiest few would let a single burst set
# the scale of the whole week).
PEAK_SLOTS = 0.25


def pressure(fleet: Fleet, demand: Demand) -> dict[str, float]:
    """How much of what the plans can serve ``demand`` asks for, per limit: its tokens
    over the weekly windows' capacity (``weekly``), each family's over its family
    window's (``sonnet``, ``opus``), and the busiest quarter of the 5-hour slots (from
    the start) over the plans' 5-hour capacity in them (``peak``: where the 5-hour
    windows are the tighter limit). A plan counts its 5-hour capacity once a slot
    whatever its phase: over a sustained peak that is what it serves; a burst that
    straddles its reset could get up to twice as much."""
    per_family = np.bincount(demand.family, weights=demand.counted, minlength=3)
    found = {"weekly": float(demand.counted.sum()) / max(_weekly(fleet, "seven_day"), 1)}
    for index, name in ((0, "sonnet"), (1, "opus")):
        found[name] = float(per_family[index]) / max(_weekly(fleet, FAMILY_WINDOW[name]), 1)
    five = _five_hour(fleet)
    slot = np.minimum((demand.at // (5 * 3600)).astype(int), len(five) - 1)
    per_slot = np.bincount(slot, weights=demand.counted, minlength=len(five))
    ratios = np.sort(per_slot / np.maximum(five, 1.0))
    busiest = max(1, round(PEAK_SLOTS * len(five)))
    found["peak"] = float(ratios[-busiest:].mean())
    return found


def demand_of(trace: Trace) -> Demand:
    """The trace's requests as ``servable`` counts them."""
    read = trace.fleet.cache_weights["read"]
    at, family, counted = [], [], []
    for turn in trace.turns:
        index = _family_index(trace.model_of(turn))
        base = (turn.at - trace.fleet.start).total_seconds()
        for part in turn.parts:
            at.append(base + part.offset)
            family.append(index)
            counted.append(part.tokens + math.ceil(part.cached * read))
    return Demand(np.array(at), np.array(family, dtype=int), np.array(counted, dtype=float))


def demand_ratio(trace: Trace) -> float:
    """The trace's demand over what its plans can serve: the tightest of ``pressure``'s
    limits (cached prefixes count at the trace's read weight)."""
    return max(pressure(trace.fleet, demand_of(trace)).values())


def _scale(fleet: Fleet, drafts: list[Draft], target: float) -> float:
    """The factor on every draft's fresh sizes that makes the trace's demand ratio
    ``target``: the ratio grows with it (prefixes stay as drawn), so a bisection on its
    logarithm."""
    read = fleet.cache_weights["read"]
    at = np.array([d.at + offset for d in drafts for offset in d.offsets])
    family = np.array([_family_index(d.model) for d in drafts for _ in d.offsets], dtype=int)

    def ratio(factor: float) -> float:
        counted: list[int] = []
        for draft in drafts:
            fresh, cached = _sizes(draft, factor)
            counted.extend(f + math.ceil(c * read) for f, c in zip(fresh, cached, strict=True))
        return max(pressure(fleet, Demand(at, family, np.array(counted, dtype=float))).values())

    low, high = 1e-3, 1e3
    for _ in range(40):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if ratio(middle) < target else (low, middle)
    return math.sqrt(low * high)


def _turn(draft: Draft, fleet: Fleet, factor: float) -> Turn:
    agent = fleet.agents[draft.agent]
    at = fleet.start + timedelta(seconds=draft.at)
    model = draft.model if draft.model != agent.model else None
    fresh, cached = _sizes(draft, factor)
    if draft.prefix is None:
        return Turn(at, agent.name, fresh[0], draft.trigger, model)  # version 1's shape
    requests = tuple(
        Request(offset, tokens, prefix)
        for offset, tokens, prefix in zip(draft.offsets, fresh, cached, strict=True)
    )
    return Turn(at, agent.name, sum(fresh), draft.trigger, model, requests)


# The families


@dataclass(frozen=True)
class Shape:
    """What a family draws beyond the shared parameters: each agent's arrival levels
    and profile, and the crons' turns."""

    levels: Callable[[np.random.Generator, int], np.ndarray]
    cron_share: tuple[float, float] = (0.0, 0.0)  # of the agents, bots on cron
    worker_share: tuple[float, float] = (0.0, 0.3)  # of the rest, autonomous workers


SHAPES: dict[str, Shape] = {
    "flat": Shape(_flat_levels, worker_share=(0.2, 0.6)),
    "diurnal-one-office": Shape(_one_office_levels),
    "diurnal-two-offices": Shape(_two_office_levels),
    "bursty": Shape(_bursty_levels, worker_share=(0.1, 0.5)),
    "cron": Shape(_one_office_levels, cron_share=(0.3, 0.8)),
}
FAMILY_NAMES = tuple(SHAPES)


def _describe(family: str, fleet: Fleet, target: float, one_request: bool) -> str:
    types = sorted({p.plan_type for p in fleet.subscriptions}, key=SOLD.index)
    events = [
        f"{n} {word}"
        for n, word in (
            (sum(p.revoked_at is not None for p in fleet.subscriptions), "revoked"),
            (sum(p.added_at is not None for p in fleet.subscriptions), "added"),
            (sum(p.removed_at is not None for p in fleet.subscriptions), "removed"),
        )
        if n
    ]
    price = "list prices per family" if fleet.key_prices else f"flat ${fleet.key_usd_per_mtok:g}"
    return (
        f"held-out {family}: {len(fleet.subscriptions)} plans ({', '.join(types)}"
        + (f"; {', '.join(events)}" if events else "")
        + f"), {len(fleet.agents)} agents, demand {target:.2f} x servable, "
        + ("one-request turns" if one_request else "multi-request turns, cached prefixes")
        + f", key at {price}"
    )


def _billing_draw(
    rng: np.random.Generator,
) -> tuple[bool, float, dict[str, float], dict[str, float]]:
    """Whether turns are one request each, the key's flat price and per-family
    prices, and the cache weights (a one-request trace carries no cache)."""
    one_request = bool(rng.random() < ONE_REQUEST_SHARE)
    if rng.random() < LIST_PRICE_SHARE:
        price, prices = 5.0, dict(LIST_PRICES)
    else:
        price, prices = round(float(rng.uniform(*RANGES.flat_price)), 2), {}
    weights = dict(DEFAULT_CACHE_WEIGHTS)
    if not one_request:
        weights = {
            "read": round(float(rng.uniform(*RANGES.cache_read)), 3),
            "write": round(float(rng.uniform(*RANGES.cache_write)), 3),
        }
    return one_request, price, prices, weights


def family_draw(family: str, rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    """One trace of ``family`` (a key of ``SHAPES``) drawn from ``rng``, its size
    within ``limits``."""
    shape = SHAPES[family]
    plans = _plans(rng)
    count = int(rng.integers(RANGES.agents[0], RANGES.agents[1] + 1))
    agents = _agents(rng, plans, count)
    target = float(rng.uniform(*RANGES.demand))
    one_request, price, prices, weights = _billing_draw(rng)
    fleet = Fleet(
        name=family,
        start=START,
        end=START + WEEK,
        subscriptions=plans,
        agents=agents,
        key_usd_per_mtok=price,
        key_prices=prices,
        cache_weights=weights,
    )
    fleet = replace(fleet, description=_describe(family, fleet, target, one_request))
    turns = float(
        np.clip(
            target
            * _weekly(fleet, "seven_day")
            / rng.lognormal(math.log(TYPICAL_TURN_TOKENS), 0.5),
            limits.min_turns,
            limits.turns,
        )
    )
    cron_share = rng.uniform(*shape.cron_share)
    bots = [a for a in range(count) if rng.random() < cron_share]
    crons = _crons(rng, bots, budget=rng.uniform(0.4, 0.8) * turns) if bots else []
    arrivals = _cron_arrivals(rng, crons)
    worker = rng.uniform(*shape.worker_share)
    profiles = {a: WORKER if rng.random() < worker else PERSON for a in range(count)}
    loops = {c.agent: c.loop for c in crons}
    levels = shape.levels(rng, count)
    levels[[c.agent for c in crons]] = 0.0
    arrivals += _poisson(rng, levels, max(turns - len(arrivals), 0.2 * turns))
    arrivals.sort()
    opus = rng.uniform(*OPUS_OVERRIDE)
    prefixes = [_prefix(rng) for _ in range(count)]
    drafts: list[Draft] = []
    span = (fleet.end - fleet.start).total_seconds()
    for at, agent in arrivals:
        profile = profiles[agent]
        loop = loops.get(agent, profile.loop)
        trigger = "schedule" if agent in loops else _trigger(rng, profile)
        offsets, fresh = _loop(rng, loop, one_request)
        if at + offsets[-1] >= span:
            continue  # its last request would fall after the trace's end
        model = _model(rng, agents[agent], opus)
        prefix = None if one_request else prefixes[agent]
        drafts.append(Draft(at, agent, trigger, model, offsets, fresh, prefix))
    drafts = _bounded(rng, drafts, limits)
    factor = _scale(fleet, drafts, target)
    return Trace(fleet, tuple(_turn(d, fleet, factor) for d in drafts))


def _bounded(rng: np.random.Generator, drafts: list[Draft], limits: Limits) -> list[Draft]:
    """At most ``limits.turns`` turns and ``limits.requests`` requests: turns dropped at
    random until both hold (the load keeps its shape)."""
    keep = np.ones(len(drafts), dtype=bool)
    order = rng.permutation(len(drafts))
    requests = sum(len(d.offsets) for d in drafts)
    turns = len(drafts)
    for i in order:
        if turns <= limits.turns and requests <= limits.requests:
            break
        keep[i] = False
        turns -= 1
        requests -= len(drafts[i].offsets)
    return [d for d, kept in zip(drafts, keep, strict=True) if kept]


def flat(rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    return family_draw("flat", rng, limits)


def diurnal_one_office(rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    return family_draw("diurnal-one-office", rng, limits)


def diurnal_two_offices(rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    return family_draw("diurnal-two-offices", rng, limits)


def bursty(rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    return family_draw("bursty", rng, limits)


def cron(rng: np.random.Generator, limits: Limits = LIMITS) -> Trace:
    return family_draw("cron", rng, limits)


FAMILIES: dict[str, Callable[[np.random.Generator, Limits], Trace]] = {
    "flat": flat,
    "diurnal-one-office": diurnal_one_office,
    "diurnal-two-offices": diurnal_two_offices,
    "bursty": bursty,
    "cron": cron,
}
NAME = re.compile(r"^(?P<family>[a-z-]+)-(?P<index>\d+)-s(?P<seed>\d+)$")


def trace_name(family: str, index: int, seed: int) -> str:
    return f"{family}-{index:02d}-s{seed}"


def holdout_trace(seed: int, index: int, limits: Limits = LIMITS) -> Trace:
    """Trace ``index`` of the run whose seed is ``seed``: the families in turn, each
    drawn from its own generator, so any one can be drawn again alone."""
    family = FAMILY_NAMES[index % len(FAMILY_NAMES)]
    trace = FAMILIES[family](np.random.default_rng([seed, index]), limits)
    fleet = replace(trace.fleet, name=trace_name(family, index, seed), seed=seed)
    return replace(trace, fleet=fleet)


def trace_named(name: str) -> Trace:
    """The held-out trace ``name`` (``<family>-<index>-s<seed>``) drawn again; raises
    ValueError for a name of another shape."""
    match = NAME.match(name)
    if match is None or match["family"] not in FAMILIES:
        raise ValueError(f"not a held-out trace's name: {name!r}")
    index, seed = int(match["index"]), int(match["seed"])
    if FAMILY_NAMES[index % len(FAMILY_NAMES)] != match["family"]:
        raise ValueError(f"trace {index} of a run is not of family {match['family']!r}")
    return holdout_trace(seed, index)
