"""Builders for readings in rule and ranking tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from routing.headroom.reading import Reading, ReadingStatus, WindowReading

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def window(
    utilization: float | None,
    *,
    resets_in: timedelta | None = timedelta(hours=3),
    status: str | None = "allowed",
    now: datetime = T0,
) -> WindowReading:
    return WindowReading(
        utilization=utilization,
        resets_at=now + resets_in if resets_in is not None else None,
        status=status,
    )


def reading(
    *,
    five_hour: float | None = 10.0,
    seven_day: float | None = 20.0,
    age: timedelta = timedelta(minutes=1),
    status: ReadingStatus = ReadingStatus.OK,
    now: datetime = T0,
    five_hour_status: str = "allowed",
    seven_day_status: str = "allowed",
    five_hour_resets_in: timedelta = timedelta(hours=3),
    seven_day_resets_in: timedelta = timedelta(days=3),
    reset_in: timedelta | None = None,
    extra: dict[str, WindowReading] | None = None,
) -> Reading:
    windows: dict[str, WindowReading] = {}
    if five_hour is not None:
        windows["five_hour"] = window(
            five_hour, resets_in=five_hour_resets_in, status=five_hour_status, now=now
        )
    if seven_day is not None:
        windows["seven_day"] = window(
            seven_day, resets_in=seven_day_resets_in, status=seven_day_status, now=now
        )
    windows.update(extra or {})
    return Reading(
        fetched_at=now - age,
        status=status,
        windows=windows,
        source="probe",
        reset_at=now + reset_in if reset_in is not None else None,
    )


def limited(
    *,
    age: timedelta = timedelta(minutes=1),
    resets_in: timedelta = timedelta(hours=1),
    now: datetime = T0,
) -> Reading:
    """A 429 reading: the 5h window is full and resets in ``resets_in``."""
    return reading(
        five_hour=100.0,
        five_hour_status="rejected",
        five_hour_resets_in=resets_in,
        status=ReadingStatus.RATE_LIMITED,
        reset_in=resets_in,
        age=age,
        now=now,
    )
