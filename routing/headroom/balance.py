"""The balanced (reset-aware) strategy's measure of one serving reading, and its floors.

Pure, no Django and no Redis. A window's score is its remaining percent over the share
of the window still to run (``remaining / clamp(time_left / duration, 0.05, 1)``): a
window about to reset is worth more than its remaining figure. One implementation, on
the reading's figures (integer microseconds), because ranking 10,000 candidates runs
it 10,000 times; ``balance_of`` is that implementation asked with datetimes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from math import floor, inf, log
from typing import NamedTuple

from routing.headroom.classification import Tier, classify_headroom, instants_at
from routing.headroom.precomputed import (
    DecidingWindow,
    Precomputed,
    deciding_windows,
    precomputed_of,
)
from routing.headroom.reading import SEVEN_DAY, Reading

# A window about to reset is worth more than its remaining figure, but not without
# bound: 5 % of the window left weighs as much as any less.
PACE_FLOOR = 0.05
# Hysteresis, in percent remaining of the limiting window: a plan in use keeps its
# agents down to INCUMBENT_FLOOR (it leaves strictly below); any other plan is
# admitted only strictly above ADMISSION_FLOOR.
INCUMBENT_FLOOR = 2.0
ADMISSION_FLOOR = 5.0
# The balanced ranking: admitted plans whose scores fall in one band this factor wide
# rank as equals (``spread_band``).
SPREAD = 1.25
_LOG_SPREAD = log(SPREAD)
_US_PER_SECOND = 1_000_000


class Balance(NamedTuple):
    """What the balanced strategy reads from one serving reading.

    ``score`` is the tightest window's remaining / pace; ``remaining`` the lowest
    remaining percent of the deciding windows (the one nearest to refusing);
    ``window`` the name of the window that set the score.
    """

    score: float
    remaining: float
    window: str


def balance_at(
    figures: Precomputed, now: int, five_hour_since: int, family: str | None
) -> tuple[float, float, str]:
    """``Balance``'s fields of a measured reading's ``figures`` as a plain tuple (the
    ranking unpacks it at once); instants as integer µs.

    Only for a measured (serving, usable) reading: every deciding window present
    carries a figure. The 5h figure counts while it counts for banded (at or after
    ``five_hour_since``).
    """
    deciding = figures[10].get(family)
    if deciding is None:
        deciding = deciding_windows(figures, family)
    # Without the 5h window once its figure no longer counts. (A conditional, not an
    # index by the comparison: a bool index leaves the tuple's fast path.)
    windows, remaining = deciding[1] if figures[0] < five_hour_since else deciding[0]
    return balance_of_windows(windows, remaining, now)


def balance_of_windows(
    windows: tuple[DecidingWindow, ...], remaining: float, now: int
) -> tuple[float, float, str]:
    """``balance_at`` of the deciding ``windows`` that count (and ``remaining``, their
    lowest remaining percent) at ``now`` (µs), as the classification keeps them beside
    a measured reading's headroom (``headroom_held``): the ranking's hot path. An
    unknown reset counts as a whole window left (the least the figure can be worth)."""
    best_score, best_name = 0.0, ""
    for name, left, resets_at, duration in windows:
        if resets_at is None:
            score = left
        else:
            pace = (resets_at - now) / _US_PER_SECOND / duration
            score = left / (PACE_FLOOR if pace < PACE_FLOOR else 1.0 if pace > 1.0 else pace)
        if not best_name or score < best_score:  # the first of the lowest
            best_score, best_name = score, name
    if not best_name:  # unreachable for a measured reading (it has a weekly figure)
        return 100.0, 100.0, SEVEN_DAY
    return best_score, remaining, best_name


def balance_of(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Balance | None:
    """The balanced figures of a measured reading at ``now``; None when it is not
    measured (unknown or refusing: see ``classify_headroom``)."""
    headroom = classify_headroom(reading, now=now, max_age=max_age, family=family)
    if reading is None or headroom.tier is not Tier.MEASURED:
        return None
    instants = instants_at(now, max_age)
    return Balance._make(balance_at(precomputed_of(reading), instants[0], instants[2], family))


def spread_band(score: float) -> float:
    """The band of an admitted plan's score (bands a factor of ``SPREAD`` wide: 1.25**k
    up to 1.25**(k+1)); within a band the load-balance order decides (fewest agents
    first). Agents that leave a refusing plan together then spread over the plans that
    score about as well instead of all landing on the single best one (each arrival
    raises that plan's agent count), the way a ramp admits a herd a few at a time."""
    return floor(log(score) / _LOG_SPREAD) if score > 0 else -inf


def admitted(balance: Balance) -> bool:
    """Whether a plan not in use may take an agent: strictly above 5 % remaining."""
    return balance.remaining > ADMISSION_FLOOR


def incumbent_holds(balance: Balance) -> bool:
    """Whether the plan in use keeps its agent: down to 2 % remaining, inclusive."""
    return balance.remaining >= INCUMBENT_FLOOR
