"""The exhaustion forecast: when each quota window runs out at its recent burn rate.

Pure rules, no Django and no Redis. The sampler computes a forecast from the
subscription's history each time it stores a reading (``forecast_store.py``) and keeps it
in the cache beside the snapshot; the turn's pre-dispatch read fetches it in the same
round trip and ``exhausted_before`` decides whether a turn starting now would likely
outlive the plan's quota. Instants are aware datetimes; the JSON form carries ISO
strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from routing.headroom.reading import parse_instant
from routing.headroom.windows import window_duration

# The burn rate is the slope over this much recent history: long enough to smooth a
# burst of one turn, short enough to follow a fleet that just got busy or went idle.
LOOKBACK = timedelta(hours=1)

FULL = 100.0


class UsagePoint(NamedTuple):
    """One observed utilization (percent) of one window at one instant."""

    at: datetime
    utilization: float


@dataclass(frozen=True)
class WindowForecast:
    """One window forecast to run out at ``exhausts_at`` (never at or past its reset).

    ``burn_per_hour`` is the fitted slope in percentage points per hour; ``resets_at``
    is the reset of the period the forecast describes (None when unknown).
    """

    exhausts_at: datetime
    burn_per_hour: float
    resets_at: datetime | None


@dataclass(frozen=True)
class Forecast:
    """Every window of one subscription that is forecast to run out, as of ``computed_at``.

    A window absent from ``windows`` has no forecast: too few points, not burning, or
    resetting first.
    """

    computed_at: datetime
    windows: Mapping[str, WindowForecast] = field(default_factory=dict)


def _period_points(
    points: Iterable[UsagePoint], *, now: datetime, period_start: datetime | None
) -> list[UsagePoint]:
    """The points of the current period inside the lookback, oldest first.

    A point before the period's start, or before a drop in utilization (a reset we
    saw happen but whose instant we do not know), measures quota that no longer
    exists, so the slope would mix two periods.
    """
    since = now - LOOKBACK
    if period_start is not None:
        since = max(since, period_start)
    kept = sorted(p for p in points if since <= p.at <= now)
    for i in range(len(kept) - 1, 0, -1):
        if kept[i].utilization < kept[i - 1].utilization:
            return kept[i:]
    return kept


def _slope_per_second(points: Sequence[UsagePoint]) -> float | None:
    """The least-squares slope of utilization over time, or None when it is undefined."""
    origin = points[0].at
    xs = [(p.at - origin).total_seconds() for p in points]
    ys = [p.utilization for p in points]
    mean_x = sum(xs) / len(xs)
    mean_y = sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None  # every point at one instant: no rate to speak of
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def window_exhaustion(
    points: Iterable[UsagePoint],
    *,
    now: datetime,
    resets_at: datetime | None,
    duration: timedelta | None,
) -> WindowForecast | None:
    """When one window runs out at its recent burn rate, or None.

    The rate is the least-squares slope over the current period's points of the last
    ``LOOKBACK`` (the period starts at ``resets_at - duration`` when both are known);
    it runs from the latest point's utilization to 100%. None with fewer than two
    points, a slope that is not positive, or an instant at or past the reset (a window
    that resets first never runs out). Never before ``now``: a window already full
    runs out now.
    """
    period_start = resets_at - duration if resets_at is not None and duration else None
    kept = _period_points(points, now=now, period_start=period_start)
    if len(kept) < 2:
        return None
    slope = _slope_per_second(kept)
    if slope is None or slope <= 0:
        return None
    last = kept[-1]
    left = max(0.0, FULL - last.utilization)
    exhausts_at = max(now, last.at + timedelta(seconds=left / slope))
    if resets_at is not None and exhausts_at >= resets_at:
        return None
    return WindowForecast(
        exhausts_at=exhausts_at, burn_per_hour=round(slope * 3600, 2), resets_at=resets_at
    )


def forecast_compute(
    history: Mapping[str, Iterable[UsagePoint]],
    *,
    resets: Mapping[str, datetime | None],
    now: datetime,
) -> Forecast:
    """The forecast of every window in ``history`` (its points), given each window's
    current reset from the latest reading (``resets``; a window missing there has no
    known reset)."""
    windows: dict[str, WindowForecast] = {}
    for name, points in history.items():
        found = window_exhaustion(
            points, now=now, resets_at=resets.get(name), duration=window_duration(name)
        )
        if found is not None:
            windows[name] = found
    return Forecast(computed_at=now, windows=windows)


def earliest_exhaustion(
    forecast: Forecast | None, *, now: datetime, windows: Iterable[str], max_age: timedelta
) -> datetime | None:
    """The earliest instant one of ``windows`` is forecast to run out, or None.

    A forecast older than ``max_age`` says nothing (the burn it measured may have
    stopped), and a window whose reset is at or before ``now`` has its quota back.
    """
    if forecast is None or now - forecast.computed_at > max_age:
        return None
    found = [
        w.exhausts_at
        for name in windows
        if (w := forecast.windows.get(name)) is not None
        and (w.resets_at is None or w.resets_at > now)
    ]
    return min(found, default=None)


def forecast_current(
    forecast: Forecast | None, *, now: datetime, max_age: timedelta
) -> Forecast | None:
    """What of ``forecast`` still holds at ``now`` (for display): None when it is
    older than ``max_age``; without the windows whose reset is at or before ``now``."""
    if forecast is None or now - forecast.computed_at > max_age:
        return None
    return Forecast(
        computed_at=forecast.computed_at,
        windows={
            name: w
            for name, w in forecast.windows.items()
            if w.resets_at is None or w.resets_at > now
        },
    )


def exhausted_before(
    forecast: Forecast | None,
    *,
    now: datetime,
    ends_at: datetime,
    windows: Iterable[str],
    max_age: timedelta,
) -> bool:
    """Whether a turn running from ``now`` to ``ends_at`` would likely see one of
    ``windows`` run out: its forecast instant is strictly before ``ends_at``."""
    at = earliest_exhaustion(forecast, now=now, windows=windows, max_age=max_age)
    return at is not None and at < ends_at


# The JSON form (the cache).


def forecast_key(subscription_id: int) -> str:
    return f"headroom:forecast:{subscription_id}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def forecast_to_json(forecast: Forecast) -> dict[str, Any]:
    return {
        "computed_at": forecast.computed_at.isoformat(),
        "windows": {
            name: {
                "exhausts_at": w.exhausts_at.isoformat(),
                "burn_per_hour": w.burn_per_hour,
                "resets_at": _iso(w.resets_at),
            }
            for name, w in forecast.windows.items()
        },
    }


def forecast_from_json(data: Mapping[str, Any]) -> Forecast:
    """Parse ``forecast_to_json`` output; raises ValueError/KeyError/TypeError if malformed."""
    computed_at = parse_instant(data["computed_at"])
    if computed_at is None:
        raise ValueError("a forecast needs computed_at")
    windows: dict[str, WindowForecast] = {}
    for name, w in dict(data["windows"]).items():
        exhausts_at = parse_instant(w["exhausts_at"])
        if exhausts_at is None:
            raise ValueError("a window forecast needs exhausts_at")
        windows[str(name)] = WindowForecast(
            exhausts_at=exhausts_at,
            burn_per_hour=float(w["burn_per_hour"]),
            resets_at=parse_instant(w.get("resets_at")),
        )
    return Forecast(computed_at=computed_at, windows=windows)
