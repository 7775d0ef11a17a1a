"""The exhaustion forecast's rules as tables: when a window runs out at its burn rate,
and whether a turn starting now would outlive the plan."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from routing.headroom.exhaustion_forecast import (
    LOOKBACK,
    Forecast,
    UsagePoint,
    WindowForecast,
    earliest_exhaustion,
    exhausted_before,
    forecast_compute,
    forecast_from_json,
    forecast_to_json,
    window_exhaustion,
)
from routing.headroom.windows import turn_windows
from tests.headroom.readings import T0

MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
FIVE_HOURS = timedelta(hours=5)
# A 5h window whose period began an hour ago: every point of the lookback is in it.
RESETS = timedelta(hours=4)


def pts(*pairs: tuple[int, float]) -> list[UsagePoint]:
    """Points as (minutes before T0, utilization)."""
    return [UsagePoint(T0 - m * MIN, u) for m, u in pairs]


# Ten points an hour: 1 percentage point per minute.
STEADY = pts((20, 40.0), (10, 50.0), (0, 60.0))


@pytest.mark.parametrize(
    ("points", "resets_in", "expected_in"),
    [
        # 60% now, 1 pt/min: 40 minutes to go.
        (STEADY, RESETS, 40 * MIN),
        # Two points are enough; one is not.
        (pts((10, 50.0), (0, 60.0)), RESETS, 40 * MIN),
        (pts((0, 60.0)), RESETS, None),
        ([], RESETS, None),
        # Not burning: flat or falling gives no forecast.
        (pts((20, 60.0), (10, 60.0), (0, 60.0)), RESETS, None),
        # Two readings of one instant give no rate.
        ([UsagePoint(T0, 50.0), UsagePoint(T0, 60.0)], RESETS, None),
        # Capped at the reset: running out exactly at the reset is the reset first...
        (STEADY, 40 * MIN, None),
        (STEADY, 39 * MIN, None),
        # ...one second earlier still runs out.
        (STEADY, 40 * MIN + timedelta(seconds=1), 40 * MIN),
        # No known reset: no cap.
        (STEADY, None, 40 * MIN),
        # A window already full runs out now, never before.
        (pts((10, 90.0), (0, 100.0)), RESETS, timedelta(0)),
        (pts((10, 95.0), (5, 120.0)), RESETS, timedelta(0)),
        # Points older than the lookback do not count: only the last two of these.
        (
            [UsagePoint(T0 - LOOKBACK - MIN, 0.0), *pts((10, 50.0), (0, 60.0))],
            RESETS,
            40 * MIN,
        ),
        # A point exactly at the lookback's edge counts (20 pts over 60 min: 1/3 per min).
        ([UsagePoint(T0 - LOOKBACK, 40.0), UsagePoint(T0, 60.0)], RESETS, 120 * MIN),
        # A drop is a reset seen between two readings: the points before it are the
        # old period's (with them the slope would be negative).
        (pts((30, 90.0), (20, 95.0), (10, 10.0), (0, 20.0)), RESETS, 80 * MIN),
        # A future point (a clock ahead of ours) is ignored.
        ([*pts((10, 50.0), (0, 60.0)), UsagePoint(T0 + MIN, 99.0)], RESETS, 40 * MIN),
    ],
)
def test_a_window_runs_out_at_its_recent_burn_rate(
    points: list[UsagePoint], resets_in: timedelta | None, expected_in: timedelta | None
) -> None:
    resets_at = T0 + resets_in if resets_in is not None else None
    found = window_exhaustion(points, now=T0, resets_at=resets_at, duration=FIVE_HOURS)
    if expected_in is None:
        assert found is None
    else:
        assert found is not None
        assert found.exhausts_at == T0 + expected_in
        assert found.resets_at == resets_at


@pytest.mark.parametrize(
    ("period_started_ago", "expected_in"),
    [
        # The period began 15 minutes ago: the point 20 minutes ago was the old one's.
        (15 * MIN, 40 * MIN),
        # A point exactly at the period's start belongs to it: all three count, and
        # the steeper start makes it 3 pts/min, so 40 pts last 800 s.
        (20 * MIN, timedelta(seconds=800)),
        # The period began 5 minutes ago: one point left, no forecast.
        (5 * MIN, None),
    ],
)
def test_points_before_the_windows_last_reset_do_not_count(
    period_started_ago: timedelta, expected_in: timedelta | None
) -> None:
    # The old period burned fast; with it the rate would be much steeper.
    points = pts((20, 0.0), (10, 50.0), (0, 60.0))
    resets_at = T0 - period_started_ago + FIVE_HOURS
    found = window_exhaustion(points, now=T0, resets_at=resets_at, duration=FIVE_HOURS)
    if expected_in is None:
        assert found is None
    else:
        assert found is not None and found.exhausts_at == T0 + expected_in
    if period_started_ago == 20 * MIN:
        assert found is not None and found.burn_per_hour == 180.0  # 0 -> 60 in 20 minutes


def test_the_burn_rate_is_the_least_squares_slope() -> None:
    # 40, 55, 60 at -20, -10, 0: slope 1 pt/min exactly, from the latest 60%.
    found = window_exhaustion(
        pts((20, 40.0), (10, 55.0), (0, 60.0)),
        now=T0,
        resets_at=T0 + RESETS,
        duration=FIVE_HOURS,
    )
    assert found is not None
    assert found.burn_per_hour == 60.0
    assert found.exhausts_at == T0 + 40 * MIN


def test_the_forecast_runs_from_the_latest_point_never_before_now() -> None:
    # The latest reading is 30 minutes old and 40 minutes' burn was left then.
    points = pts((40, 50.0), (30, 60.0))
    found = window_exhaustion(points, now=T0, resets_at=T0 + RESETS, duration=FIVE_HOURS)
    assert found is not None and found.exhausts_at == T0 + 10 * MIN
    # With more than its 40 minutes gone, it is "now", not a past instant.
    points = pts((58, 50.0), (55, 60.0))
    found = window_exhaustion(points, now=T0, resets_at=T0 + RESETS, duration=FIVE_HOURS)
    assert found is not None and found.exhausts_at == T0


def test_a_forecast_covers_only_the_windows_that_run_out() -> None:
    history = {
        "five_hour": STEADY,
        "seven_day": pts((20, 30.0), (10, 30.0), (0, 30.0)),  # idle this hour
        "seven_day_sonnet": STEADY,
    }
    resets = {"five_hour": T0 + RESETS, "seven_day_sonnet": T0 + 30 * MIN}
    forecast = forecast_compute(history, resets=resets, now=T0)
    assert forecast.computed_at == T0
    # The Sonnet week resets in 30 minutes, before its 40 minutes of burn are up.
    assert set(forecast.windows) == {"five_hour"}


def _forecast(**windows: tuple[timedelta, timedelta | None]) -> Forecast:
    """Windows as name -> (runs out in, resets in)."""
    return Forecast(
        computed_at=T0,
        windows={
            name: WindowForecast(
                exhausts_at=T0 + out, burn_per_hour=10.0, resets_at=T0 + r if r else None
            )
            for name, (out, r) in windows.items()
        },
    )


EXPECTED_TURN = 5 * MIN
MAX_AGE = HOUR


@pytest.mark.parametrize(
    ("forecast", "now", "family", "exhausted"),
    [
        (None, T0, None, False),
        (_forecast(), T0, None, False),
        # Strictly before the turn's end: 4m59s is, exactly 5 minutes is not.
        (_forecast(five_hour=(5 * MIN - timedelta(seconds=1), FIVE_HOURS)), T0, None, True),
        (_forecast(five_hour=(5 * MIN, FIVE_HOURS)), T0, None, False),
        (_forecast(seven_day=(2 * MIN, None)), T0, None, True),
        # A family window counts only for a turn of that family.
        (_forecast(seven_day_sonnet=(2 * MIN, HOUR)), T0, "seven_day_sonnet", True),
        (_forecast(seven_day_sonnet=(2 * MIN, HOUR)), T0, "seven_day_opus", False),
        (_forecast(seven_day_sonnet=(2 * MIN, HOUR)), T0, None, False),
        # A window whose reset is now (or past) has its quota back.
        (_forecast(five_hour=(2 * MIN, 10 * MIN)), T0 + 10 * MIN, None, False),
        (
            _forecast(five_hour=(2 * MIN, 10 * MIN)),
            T0 + 10 * MIN - timedelta(seconds=1),
            None,
            True,
        ),
        # A forecast older than the freshness limit says nothing; exactly at it still does.
        (_forecast(five_hour=(HOUR + MIN, FIVE_HOURS)), T0 + MAX_AGE, None, True),
        (
            _forecast(five_hour=(HOUR + MIN, FIVE_HOURS)),
            T0 + MAX_AGE + timedelta(seconds=1),
            None,
            False,
        ),
    ],
)
def test_a_turn_is_exhausted_before_it_ends_only_by_a_window_it_spends(
    forecast: Forecast | None, now: datetime, family: str | None, exhausted: bool
) -> None:
    assert (
        exhausted_before(
            forecast,
            now=now,
            ends_at=now + EXPECTED_TURN,
            windows=turn_windows(family),
            max_age=MAX_AGE,
        )
        is exhausted
    )


def test_the_earliest_window_decides() -> None:
    forecast = _forecast(five_hour=(30 * MIN, FIVE_HOURS), seven_day=(20 * MIN, None))
    at = earliest_exhaustion(forecast, now=T0, windows=turn_windows(None), max_age=MAX_AGE)
    assert at == T0 + 20 * MIN


def test_a_forecast_survives_its_json_form() -> None:
    forecast = _forecast(five_hour=(30 * MIN, FIVE_HOURS), seven_day=(20 * MIN, None))
    assert forecast_from_json(forecast_to_json(forecast)) == forecast


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"computed_at": None, "windows": {}},
        {"computed_at": "2030-01-01T12:00:00", "windows": {}},  # naive
        {"computed_at": T0.isoformat(), "windows": {"five_hour": {"burn_per_hour": 1}}},
        {"computed_at": T0.isoformat(), "windows": ["five_hour"]},
    ],
)
def test_a_malformed_forecast_is_refused(data: dict[str, object]) -> None:
    with pytest.raises((KeyError, TypeError, ValueError)):
        forecast_from_json(data)
