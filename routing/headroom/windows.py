"""The quota windows: how long one lasts, and which of them a turn spends.

Pure, no Django and no Redis. A window's name is the provider's (``five_hour``,
``seven_day``, and per model family ``seven_day_opus``, ``seven_day_sonnet``).
"""

from __future__ import annotations

from datetime import timedelta

from routing.headroom.reading import CORE_WINDOWS, FIVE_HOUR, SEVEN_DAY

# Model-family windows (seven_day_opus, seven_day_sonnet) are weekly, like seven_day.
FAMILY_WINDOW_PREFIX = SEVEN_DAY + "_"
WEEK = timedelta(days=7)
_DURATIONS = {FIVE_HOUR: timedelta(hours=5), SEVEN_DAY: WEEK}


def window_duration(name: str) -> timedelta | None:
    """How long one period of window ``name`` lasts; None for a window we do not know."""
    if name in _DURATIONS:
        return _DURATIONS[name]
    if name.startswith(FAMILY_WINDOW_PREFIX):
        return WEEK
    return None


def family_window(model: str) -> str | None:
    """The model-family weekly window a turn on ``model`` also spends, if any."""
    lowered = model.lower()
    for family in ("opus", "sonnet"):
        if family in lowered:
            return FAMILY_WINDOW_PREFIX + family
    return None


def turn_windows(family: str | None) -> tuple[str, ...]:
    """The windows a turn spends: the core two and, when it has one, its family's."""
    return (*CORE_WINDOWS, family) if family else CORE_WINDOWS
