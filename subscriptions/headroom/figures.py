"""A reading's figures as the ranking reads them: built once, kept on the reading.

Pure, no Django and no Redis. Instants are integer microseconds since the epoch
(``reading.micros``: exact, and they compare as the instants do whatever their
tzinfo), so a ranking of 10,000 candidates never touches a datetime. The store decodes
a stored value once per process, so a warm ranking finds these already built.
"""

from __future__ import annotations

from typing import NamedTuple, cast

from subscriptions.headroom.reading import (
    CORE_WINDOWS,
    FIVE_HOUR,
    NON_BLOCKING_STATUSES,
    SEVEN_DAY,
    Reading,
    ReadingStatus,
    WindowReading,
    micros,
)
from subscriptions.headroom.windows import WEEK, window_duration

# A window's figures: (utilization, reset µs, malformed, blocking, remaining percent,
# duration in seconds).
WindowFigures = tuple[float | None, int | None, bool, bool, float | None, float]


class Figures(NamedTuple):
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


_WEEK_SECONDS = WEEK.total_seconds()


def figures_of(reading: Reading) -> Figures:
    """``reading``'s figures, built on first use and kept on the reading."""
    figures = reading._figures
    if figures is None:
        figures = _figures_build(reading)
        object.__setattr__(reading, "_figures", figures)
    return cast(Figures, figures)


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


def _figures_build(reading: Reading) -> Figures:
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
    return Figures(
        cast(int, micros(reading.fetched_at)),
        reading.status,
        micros(reading.reset_at),
        five[0] if five is not None else None,
        seven[0] if seven is not None else None,
        core_reset,
        core_malformed,
        core_blocked,
        windows,
    )
