"""What a reading says about one subscription at ``now``: may it be used as evidence
(the gate), and if so, does it serve and how full is it (the tier, fullness, band).

Pure, no Django and no Redis, so the tests read as tables. Callers pass the freshness
limit (``max_age``) from settings; the fixed policy (the 30-minute life of a 5h
figure, 10-point bands) lives here as constants. One implementation, on the reading's
figures (``precomputed.py``: instants as integer microseconds), because ranking 10,000
candidates runs it 10,000 times; ``classify_headroom`` is that implementation asked
with datetimes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple, cast

from routing.headroom.precomputed import (
    Precomputed,
    WindowFigures,
    deciding_windows,
    precomputed_of,
)
from routing.headroom.reading import Reading, ReadingStatus, micros
from routing.headroom.windows import turn_windows

# A 5h window can go from empty to full within the hour; an older figure says little.
FIVE_HOUR_COUNTS_FOR = timedelta(minutes=30)
BAND_POINTS = 10
TOP_BAND = 100 // BAND_POINTS


class Gate(StrEnum):
    USABLE = "usable"
    ABSENT = "absent"
    STALE = "stale"
    WINDOW_RESET = "window_reset"
    NO_ANSWER = "no_answer"
    MALFORMED = "malformed"


class Tier(StrEnum):
    MEASURED = "measured"
    UNKNOWN = "unknown"
    REFUSING = "refusing"


class Headroom(NamedTuple):
    """What a reading says about one subscription at ``now``.

    ``five_hour``/``seven_day`` are the reading's figures; ``fullness`` is the figure
    that ranks (the fuller weekly window, and the 5h one while it counts), and
    ``band`` its 10-point band. A NamedTuple: ranking builds one per candidate.
    """

    tier: Tier
    gate: Gate
    five_hour: float | None = None
    seven_day: float | None = None
    fullness: float | None = None
    fetched_at: datetime | None = None
    band: int | None = None

    def age_seconds(self, now: datetime) -> float | None:
        return (now - self.fetched_at).total_seconds() if self.fetched_at is not None else None


NO_EVIDENCE = Headroom(Tier.UNKNOWN, Gate.ABSENT)

# Hot-path aliases: enum attribute lookups cost more than the comparisons they feed.
_USABLE, _STALE, _NO_ANSWER = Gate.USABLE, Gate.STALE, Gate.NO_ANSWER
_WINDOW_RESET, _MALFORMED = Gate.WINDOW_RESET, Gate.MALFORMED
_MEASURED, _UNKNOWN, _REFUSING = Tier.MEASURED, Tier.UNKNOWN, Tier.REFUSING
_OK, _ERROR = ReadingStatus.OK, ReadingStatus.ERROR
_new = tuple.__new__
_MICROSECOND = timedelta(microseconds=1)
_FIVE_HOUR_COUNTS_US = FIVE_HOUR_COUNTS_FOR // _MICROSECOND


class Instants(NamedTuple):
    """The instants a classification at ``now`` compares with, as integer µs."""

    now: int
    oldest: int  # the oldest fetch instant still fresh
    five_hour_since: int  # the oldest fetch instant whose 5h figure still counts


def instants_at(now: datetime, max_age: timedelta) -> Instants:
    now_us = cast(int, micros(now))
    return Instants(now_us, now_us - max_age // _MICROSECOND, now_us - _FIVE_HOUR_COUNTS_US)


def _headroom_at(
    reading: Reading, figures: Precomputed, instants: Instants, family: str | None
) -> Headroom:
    """``classify_headroom`` of ``reading`` (its ``figures``) at ``instants``."""
    # One function, not a gate function and a tier function: ranking calls this once
    # per candidate. The windows are judged in order (five_hour, seven_day, the
    # family's) and the first that has reset or is malformed decides; ``figures``
    # summarised the core two.
    fetched, status, reset_at, five_hour, seven_day, core_reset, malformed, blocked, windows = (
        figures[:9]
    )
    now = instants[0]
    extra = windows.get(family) if family is not None else None
    if fetched < instants[1]:
        gate = _STALE
    elif status is _ERROR:
        gate = _NO_ANSWER
    elif (reset_at is not None and reset_at <= now) or (
        core_reset is not None and core_reset <= now
    ):
        gate = _WINDOW_RESET
    elif malformed:
        gate = _MALFORMED
    else:
        gate = _USABLE
        if extra is not None:
            extra_reset = extra[1]
            if extra_reset is not None and extra_reset <= now:
                gate = _WINDOW_RESET
            elif extra[2]:
                gate = _MALFORMED
            elif extra[3]:
                blocked = True
        if gate is _USABLE and status is _OK and seven_day is None:
            gate = _MALFORMED  # a serving reading without its weekly figure
    if gate is _WINDOW_RESET and _still_blocked(windows, now, family):
        # A reading goes stale per window: the window that reset is unknown, but one
        # still blocked until a later reset keeps refusing (a weekly block outlives
        # every 5-hour rollover within it).
        gate, blocked = _USABLE, True
    if gate is not _USABLE or status is not _OK or blocked:
        # Unusable: unknown. A usable reading that is not serving is a fresh refusal.
        tier = _UNKNOWN if gate is not _USABLE else _REFUSING
        return _new(Headroom, (tier, gate, five_hour, seven_day, None, reading.fetched_at, None))
    # The gate lets a serving reading through only with every deciding figure present.
    fullness = seven_day if seven_day is not None else 0.0
    if extra is not None:
        extra_utilization = extra[0]
        if extra_utilization is not None and extra_utilization > fullness:
            fullness = extra_utilization  # the family window spends like the weekly
    if five_hour is not None and five_hour > fullness and fetched >= instants[2]:
        fullness = five_hour
    band = int(fullness // BAND_POINTS)
    if band > TOP_BAND:  # not ``min()``: a builtin call per candidate
        band = TOP_BAND
    return _new(
        Headroom, (_MEASURED, gate, five_hour, seven_day, fullness, reading.fetched_at, band)
    )


def _still_blocked(windows: dict[str, WindowFigures], now: int, family: str | None) -> bool:
    """Whether a window a turn of ``family`` spends blocks, with a well-formed figure,
    until a reset after ``now`` (or one it did not name)."""
    for name in turn_windows(family):
        window = windows.get(name)
        if window is None or not window[3] or window[2]:
            continue
        if window[1] is None or window[1] > now:
            return True
    return False


_NEVER_BEFORE, _NEVER_AFTER = -(2**63), 2**63


def _holds_between(
    precomputed: Precomputed, now: int, max_age: int, family: str | None
) -> tuple[int, int]:
    """[from, until): the instants at which every comparison ``_headroom_at`` makes
    with ``now`` comes out as it does at ``now`` (``max_age`` in µs)."""
    held_from, held_until = _NEVER_BEFORE, _NEVER_AFTER
    fetched = precomputed[0]
    extra = precomputed[8].get(family) if family is not None else None
    edges = (
        fetched + max_age + 1,  # stale from here: fetched < now - max_age
        fetched + _FIVE_HOUR_COUNTS_US + 1,  # the 5h figure stops counting here
        precomputed[2],  # a rate-limited reading's reset
        precomputed[5],  # the earliest core reset that decides
        extra[1] if extra is not None else None,  # the family window's reset
        # Each blocked window's reset: past the first reset, the last one decides.
        *(w[1] for n in turn_windows(family) if (w := precomputed[8].get(n)) and w[3]),
    )
    for edge in edges:
        if edge is None:
            continue
        if edge <= now:
            if edge > held_from:
                held_from = edge
        elif edge < held_until:
            held_until = edge
    return held_from, held_until


def headroom_held(
    reading: Reading, precomputed: Precomputed, instants: Instants, family: str | None
) -> Headroom:
    """``_headroom_at``, kept on the reading's precomputed form while it holds.

    A classification changes only at a few instants (the reading going stale, its 5h
    figure ceasing to count, a deciding reset), so between two of them a ranking
    reuses the one it made before for the same family and freshness limit: a warm
    ranking of 10,000 candidates classifies only the readings whose edge it crossed.
    """
    now = instants[0]
    max_age = now - instants[1]
    held = precomputed[9]
    entry = held.get(family)
    if entry is not None and entry[0] <= now < entry[1] and entry[2] == max_age:
        held_headroom: Headroom = entry[3]  # not ``cast()``: a call per candidate
        return held_headroom
    headroom = _headroom_at(reading, precomputed, instants, family)
    held_from, held_until = _holds_between(precomputed, now, max_age, family)
    # A measured reading's balanced windows as they count while this holds (the 5h
    # figure's edge is one of its bounds): the balanced ranking reads them from here.
    if headroom[0] is _MEASURED:
        both = deciding_windows(precomputed, family)
        windows, remaining = both[1] if precomputed[0] < instants[2] else both[0]
    else:
        windows, remaining = (), 100.0
    held[family] = (held_from, held_until, max_age, headroom, windows, remaining)
    return headroom


def classify_headroom(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Headroom:
    """Measured (serving, with figures), refusing (a fresh refusal), or unknown.

    Only a usable reading (see ``reading_gate``) is measured or refusing; anything
    else is unknown. The 5h figure counts toward fullness while at most 30 minutes
    old; the turn's family window counts like the weekly one.
    """
    if reading is None:
        return NO_EVIDENCE
    return headroom_held(reading, precomputed_of(reading), instants_at(now, max_age), family)


def reading_gate(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Gate:
    """Whether ``reading`` may be used as evidence at ``now``, and if not, why.

    Fresh while at most ``max_age`` old. A reading whose window resets at or
    before ``now`` is stale whatever its age: that quota no longer exists. Usable
    readings answered (no ``error``), and a serving one carries a weekly figure and
    a status and figure for every window that decides.
    """
    return classify_headroom(reading, now=now, max_age=max_age, family=family).gate
