"""What the week plan is solved from: each plan's windows as they stand, each agent's
demand forecast, the key's prices. Pure data, and the two estimates that build it
(``demand_profile``, ``capacity_estimate``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from routing import providers

HOURS_OF_WEEK = 168
HOUR = timedelta(hours=1)
WEEK = timedelta(weeks=1)
# The history a demand forecast learns from, and how fast an old week fades: the last
# week weighs 1, the one before ``DECAY``.
HISTORY_WEEKS = 3
DECAY = 0.5
# Below this utilization (percent) a window's tokens-per-percent is too noisy to learn.
LEARN_FROM_PERCENT = 5.0
# Families whose turns count against a weekly window of their own.
FAMILY_WINDOWS = {"opus": "seven_day_opus", "sonnet": "seven_day_sonnet"}
# Windows every turn counts against, whatever its family.
CORE = ("five_hour", "seven_day")


@dataclass(frozen=True, slots=True)
class WindowState:
    """One window of one plan now: tokens per period, what is left of the current one,
    when it resets, and its length."""

    name: str
    capacity: float
    left: float
    resets_at: datetime
    period: timedelta

    def counts(self, family: str | None) -> bool:
        """Whether a turn of ``family`` counts against this window."""
        return self.name in CORE or FAMILY_WINDOWS.get(family or "") == self.name


@dataclass(frozen=True, slots=True)
class PlanState:
    """A plan that may serve turns over the horizon (present, not paused, not refusing
    its token), with its windows."""

    id: int
    name: str
    windows: tuple[WindowState, ...]


@dataclass(frozen=True, slots=True)
class AgentDemand:
    """An agent's forecast: expected tokens in each hour of the week (hour 0: Monday
    00:00 UTC), its model family, its assignment (None: none) and its last move."""

    id: int
    name: str
    family: str | None
    assigned: int | None
    hourly: tuple[float, ...]
    moved_at: datetime | None = None

    def at(self, instant: datetime) -> float:
        """Expected tokens in the hour that holds ``instant``."""
        return self.hourly[hour_of_week(instant)] if self.hourly else 0.0


@dataclass(frozen=True, slots=True)
class WeekInputs:
    now: datetime
    plans: tuple[PlanState, ...]
    agents: tuple[AgentDemand, ...]
    # The key's $ per Mtok by family (None: the default family).
    prices: Mapping[str | None, float]

    def price(self, family: str | None) -> float:
        return self.prices.get(family, self.prices.get(None, 0.0))


def hour_of_week(instant: datetime) -> int:
    return instant.weekday() * 24 + instant.hour


def demand_profile(
    turns: Iterable[tuple[datetime, float]], *, now: datetime, since: datetime | None = None
) -> tuple[float, ...]:
    """An agent's expected tokens per hour of the week, from its past turns
    ``(started_at, tokens)`` since ``since`` (its history's start; default its first
    turn): each hour of the week is the decayed mean of that hour over the last
    ``HISTORY_WEEKS`` weeks (a week ago weighs ``DECAY`` times the week after it). An
    hour the history does not cover yet gets the mean rate of the hours it does."""
    sums = [0.0] * HOURS_OF_WEEK
    kept = [(at, tokens) for at, tokens in turns if timedelta(0) <= now - at < HISTORY_WEEKS * WEEK]
    start = since if since is not None else min((at for at, _ in kept), default=now)
    start = max(start, now - HISTORY_WEEKS * WEEK)
    for at, tokens in kept:
        if at >= start:
            sums[hour_of_week(at)] += tokens * DECAY ** ((now - at) // WEEK)
    weights = [0.0] * HOURS_OF_WEEK
    hour = start.replace(minute=0, second=0, microsecond=0)
    while hour < now:
        share = (min(hour + HOUR, now) - max(hour, start)) / HOUR
        # Aged by its middle, as a turn in it is by its start.
        age = now - (hour + HOUR / 2)
        weights[hour_of_week(hour)] += share * DECAY ** (max(age, timedelta(0)) // WEEK)
        hour += HOUR
    covered = sum(weights)
    if covered <= 0:
        return tuple(sums)
    mean = sum(sums) / covered
    return tuple(sums[h] / weights[h] if weights[h] >= 0.5 else mean for h in range(HOURS_OF_WEEK))


def capacity_estimate(served_tokens: float, rise: float | None, *, nominal: float) -> float:
    """A window's tokens per period: what the plan served between two readings of one
    period over how far its utilization rose between them (percentage points), once
    the rise says enough; else ``nominal``. A rise, not the utilization itself: what was
    used before the first reading (before Trinity saw the plan, or by another client
    early in the period) says nothing of what Trinity's tokens weigh."""
    if rise is None or rise < LEARN_FROM_PERCENT or served_tokens <= 0:
        return nominal
    return served_tokens * 100.0 / rise


# A plan's tokens per window when nothing it served says otherwise, as a multiple of
# Pro's (Anthropic sells Max 5x and Max 20x as 5 and 20 times Pro; a Team seat counts
# as Max 5x and Enterprise as Max 20x). An assumption, stated in
# docs/flows/week-plan.md; a plan of a type not listed counts as 5.
PLAN_RATIO: dict[tuple[str, str], float] = {
    (providers.ANTHROPIC, "pro"): 1,
    (providers.ANTHROPIC, "max-5x"): 5,
    (providers.ANTHROPIC, "max-20x"): 20,
    (providers.ANTHROPIC, "team"): 5,
    (providers.ANTHROPIC, "enterprise"): 20,
    (providers.OPENAI, "plus"): 1,
    (providers.OPENAI, "pro"): 20,
    (providers.OPENAI, "team"): 5,
    (providers.OPENAI, "business"): 5,
    (providers.OPENAI, "enterprise"): 20,
}
DEFAULT_RATIO = 5.0
# Max 20x's tokens per window: the provider simulator's own (``simulator/state.py``
# ``DEFAULT_CAPACITY``, pinned equal by tests/week_plan/test_gather.py). No provider
# publishes its windows in tokens; what each plan served against how far its windows
# rose replaces this (``capacity_estimate``).
MAX_20X_TOKENS: dict[str, float] = {
    "five_hour": 2_000_000,
    "seven_day": 20_000_000,
    "seven_day_sonnet": 15_000_000,
    "seven_day_opus": 10_000_000,
}
PERIODS = {
    "five_hour": timedelta(hours=5),
    "seven_day": timedelta(days=7),
    "seven_day_sonnet": timedelta(days=7),
    "seven_day_opus": timedelta(days=7),
}


def nominal_capacity(plan_type: str, window: str, provider: str = providers.ANTHROPIC) -> float:
    """A plan's assumed tokens per ``window`` (``PLAN_RATIO`` of Max 20x's / 20)."""
    ratio = PLAN_RATIO.get((provider, plan_type), DEFAULT_RATIO)
    return MAX_20X_TOKENS.get(window, MAX_20X_TOKENS["seven_day"]) * ratio / 20


def window_state(
    name: str,
    *,
    utilization: float | None,
    resets_at: datetime | None,
    capacity: float,
    now: datetime,
) -> WindowState | None:
    """A window as a reading shows it: what is left of ``capacity``, and its reset (a
    reset in the past: a fresh period that began then). None for a window no LP row
    knows."""
    period = PERIODS.get(name)
    if period is None:
        return None
    if resets_at is None:
        return WindowState(name, capacity, capacity, now + period, period)
    if resets_at <= now:
        periods = (now - resets_at) // period + 1
        return WindowState(name, capacity, capacity, resets_at + periods * period, period)
    used = capacity * (utilization or 0.0) / 100.0
    return WindowState(name, capacity, max(0.0, capacity - used), resets_at, period)
