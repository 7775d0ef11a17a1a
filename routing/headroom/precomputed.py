"""A reading's figures as the ranking reads them: built once, kept on the reading.

Pure, no Django and no Redis. Instants are integer microseconds since the epoch
(``reading.micros``: exact, and they compare as the instants do whatever their
tzinfo), so a ranking of 10,000 candidates never touches a datetime. The store decodes
a stored value once per process, so a warm ranking finds these already built.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from routing.headroom.reading import (
    CORE_WINDOWS,
    FIVE_HOUR,
    NON_BLOCKING_STATUSES,
    SEVEN_DAY,
    Reading,
    ReadingStatus,
    WindowReading,
    micros,
)
from routing.headroom.windows import WEEK, turn_windows, window_duration

# A window's figures: (utilization, reset µs, malformed, blocking, remaining percent,
# duration in seconds).
WindowFigures = tuple[float | None, int | None, bool, bool, float | None, float]


class Precomputed(NamedTuple):
    """A reading as the ranking reads it, independent of ``now`` and the family.

    ``windows``: name -> ``WindowFigures``; an unknown window lasts a week (the
    least a figure can be worth). ``core_*`` summarise the core windows in the order
    the classification judges them: the earliest reset up to the first malformed one,
    whether one is malformed, whether any before it blocks.
    """

    fetched: int
    status: ReadingStatus
    reset: int | None
    five_hour: float | None
    seven_day: float | None
    core_reset: int | None
    core_malformed: bool
    core_blocked: bool
    windows: dict[str, WindowFigures]
    # The classification's memo (``classification.headroom_held``): family -> (from,
    # until, max_age µs, headroom, and for a measured one the balanced score's windows
    # and their lowest remaining percent as they count meanwhile). Filled as rankings
    # ask; a cache, never evidence.
    held: dict[str | None, tuple[int, int, int, Any, tuple[DecidingWindow, ...], float]]
    # The balanced score's windows per family (``balance.balance_at``), built on use:
    # with the 5h window and without it (once its figure no longer counts), each with
    # the lowest remaining percent among them.
    deciding: dict[str | None, tuple[Deciding, Deciding]]


# A window a measured reading's balanced score is judged on, for one family: its name,
# remaining percent, reset (µs, None: unknown) and duration (seconds). Plain tuples, not
# named ones: the balanced ranking unpacks 10,000 readings' windows, and Python unpacks
# and indexes an exact tuple on a fast path a named tuple does not take.
DecidingWindow = tuple[str, float, "int | None", float]
# The windows a balanced score is judged on, and the lowest remaining percent of them
# (never above 100).
Deciding = tuple[tuple[DecidingWindow, ...], float]


_WEEK_SECONDS = WEEK.total_seconds()


def precomputed_of(reading: Reading) -> Precomputed:
    """``reading``'s figures, built on first use and kept on the reading."""
    figures = reading._precomputed
    if figures is None:
        figures = _precomputed_build(reading)
        object.__setattr__(reading, "_precomputed", figures)
    return cast(Precomputed, figures)


def _window_figures(name: str, window: WindowReading) -> WindowFigures:
    utilization, resets_at, status = window
    duration = window_duration(name)
    return (
        utilization,
        micros(resets_at),
        status is None or utilization is None,
        status not in NON_BLOCKING_STATUSES,
        None if utilization is None else 100.0 - utilization,
        duration.total_seconds() if duration is not None else _WEEK_SECONDS,
    )


def _precomputed_build(reading: Reading) -> Precomputed:
    windows = {name: _window_figures(name, window) for name, window in reading.windows.items()}
    core_reset: int | None = None
    core_malformed = core_blocked = False
    for name in CORE_WINDOWS:
        found = windows.get(name)
        if found is None:
            continue
        reset = found[1]
        if reset is not None and (core_reset is None or reset < core_reset):
            core_reset = reset
        if found[2]:
            core_malformed = True
            break
        if found[3]:
            core_blocked = True
    five, seven = windows.get(FIVE_HOUR), windows.get(SEVEN_DAY)
    return Precomputed(
        cast(int, micros(reading.fetched_at)),
        reading.status,
        micros(reading.reset_at),
        five[0] if five is not None else None,
        seven[0] if seven is not None else None,
        core_reset,
        core_malformed,
        core_blocked,
        windows,
        {},
        {},
    )


def deciding_windows(precomputed: Precomputed, family: str | None) -> tuple[Deciding, Deciding]:
    """The windows a turn of ``family`` spends that carry a figure, in the order the
    classification judges them (five_hour, seven_day, the family's), with the 5h window
    and without it; built once per family and kept."""
    found = precomputed[10].get(family)
    if found is None:
        windows = precomputed[8]
        every = tuple(
            (name, window[4], window[1], window[5])
            for name in turn_windows(family)
            if (window := windows.get(name)) is not None and window[4] is not None
        )
        without_five = tuple(w for w in every if w[0] != FIVE_HOUR)
        found = precomputed[10][family] = (_deciding(every), _deciding(without_five))
    return found


def _deciding(windows: tuple[DecidingWindow, ...]) -> Deciding:
    # Never above 100, as a score's floor reads it.
    return (windows, min([100.0, *(w[1] for w in windows)]))
