"""The schedule rules as tables: cron validation and the next fire instant (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from execution.schedules.cron import InvalidCron, cron_check, fire_plan, next_fire_after


def at(hour: int, minute: int, second: int = 0, *, day: int = 1) -> datetime:
    return datetime(2026, 6, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        # An instant exactly on a fire time yields the following one, never itself.
        ("*/5 * * * *", at(12, 0), at(12, 5)),
        ("*/5 * * * *", at(12, 0, 1), at(12, 5)),
        ("*/5 * * * *", at(12, 4, 59), at(12, 5)),
        ("* * * * *", at(12, 0), at(12, 1)),
        ("* * * * *", at(12, 0, 30), at(12, 1)),
        ("0 9 * * *", at(9, 0), at(9, 0, day=2)),
        ("0 9 * * *", at(8, 59, 59), at(9, 0)),
        ("30 23 * * *", at(23, 31), at(23, 30, day=2)),
        # 2026-06-01 is a Monday: weekday 1.
        ("0 0 * * 1", at(0, 0), datetime(2026, 6, 8, tzinfo=UTC)),
        ("0 0 1 * *", at(0, 0), datetime(2026, 7, 1, tzinfo=UTC)),
    ],
)
def test_the_next_fire_is_the_first_cron_instant_strictly_after(
    cron: str, after: datetime, expected: datetime
) -> None:
    assert next_fire_after(cron, after=after) == expected


def test_the_next_fire_is_utc_whatever_zone_the_instant_is_given_in() -> None:
    from zoneinfo import ZoneInfo

    paris = datetime(2026, 6, 1, 14, 0, tzinfo=ZoneInfo("Europe/Paris"))  # 12:00 UTC
    found = next_fire_after("0 13 * * *", after=paris)
    assert found == at(13, 0) and found.utcoffset() is not None
    assert found.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("due_at", "now", "expected"),
    [
        # On time: the next period.
        (at(12, 0), at(12, 0), at(12, 5)),
        (at(12, 0), at(12, 0, 30), at(12, 5)),
        # Beat was down for an hour: one fire for the gap, the next after now.
        (at(11, 0), at(12, 2), at(12, 5)),
        (at(11, 0), at(12, 5), at(12, 10)),
    ],
)
def test_a_missed_stretch_fires_once_and_resumes_after_now(
    due_at: datetime, now: datetime, expected: datetime
) -> None:
    assert fire_plan("*/5 * * * *", due_at=due_at, now=now) == expected


@pytest.mark.parametrize(
    ("cron", "normalised"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("  0   9 * *   1-5 ", "0 9 * * 1-5"),
        ("0 0 1 1 *", "0 0 1 1 *"),
    ],
)
def test_a_valid_expression_is_accepted_normalised(cron: str, normalised: str) -> None:
    assert cron_check(cron) == normalised


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("", "5 cron fields"),
        ("* * * *", "got 4"),
        # A sixth (seconds) field would fire more often than once a minute.
        ("* * * * * *", "got 6"),
        ("61 * * * *", "not a valid cron"),
        ("* 24 * * *", "not a valid cron"),
        ("a b c d e", "not a valid cron"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_a_bad_expression_is_refused_with_the_reason(cron: str, says: str) -> None:
    with pytest.raises(InvalidCron, match=says):
        cron_check(cron)
