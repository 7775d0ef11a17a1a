"""What the week plan is solved from: each plan's windows as they stand, each agent's
demand forecast, the key's prices. Pure data, and the two estimates that build it
(``demand_profile``, ``capacity_estimate``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

HOURS_OF_WEEK = 168
HOUR = timedelta(hours=1)
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


def demand_profile(turns: Iterable[tuple[datetime, float]], *, now: datetime) -> tuple[float, ...]:
    """An agent's expected tokens per hour of the week, from its past turns
    ``(started_at, tokens)``: each of the last ``HISTORY_WEEKS`` weeks weighs
    ``DECAY`` times the one after it, and the profile is the weighted mean over the
    weeks the history covers (a turn older than that is forgotten)."""
    sums = [0.0] * HOURS_OF_WEEK
    oldest = now
    for at, tokens in turns:
        age = now - at
        if age < timedelta(0) or age >= timedelta(weeks=HISTORY_WEEKS):
            continue
        oldest = min(oldest, at)
        sums[hour_of_week(at)] += tokens * DECAY ** (age // timedelta(weeks=1))
    covered = (now - oldest) / timedelta(weeks=1)
    if covered <= 0:
        return tuple(sums)
    # The weight the covered span carries: whole weeks 1, DECAY, ..., and the part week.
    weight, week = 0.0, 0
    while covered > 0 and week < HISTORY_WEEKS:
        weight += DECAY**week * min(1.0, covered)
        covered -= 1
        week += 1
    return tuple(value / weight for value in sums)


def capacity_estimate(served_tokens: float, utilization: float | None, *, nominal: float) -> float:
    """A window's tokens per period: what the plan served in the window so far over
    the share of it that reads used, once that share says enough; else ``nominal``."""
    if utilization is None or utilization < LEARN_FROM_PERCENT or served_tokens <= 0:
        return nominal
    return served_tokens * 100.0 / utilization
