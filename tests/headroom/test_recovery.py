"""Table tests for readmission and the earliest known reset, boundaries included."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.recovery import Verdict, earliest_known_reset, recovery_verdict
from tests.headroom.readings import T0, limited, reading

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
MAX_AGE = HOUR


# Readmission: absence of evidence readmits nothing


RESET = T0 - MINUTE  # a refusal window that reset a minute ago


def _reset_reading() -> Reading:
    """A refusal read 50 minutes ago whose 5h window reset a minute ago."""
    return limited(age=50 * MINUTE, resets_in=-MINUTE)


@pytest.mark.parametrize(
    ("case", "subject", "last_failure_at", "verdict"),
    [
        (
            "a fresh serving reading after the failure",
            reading(age=MINUTE),
            T0 - 5 * MINUTE,
            Verdict.SERVING_NOW,
        ),
        (
            "a fresh serving reading before the failure",
            reading(age=10 * MINUTE),
            T0 - 5 * MINUTE,
            None,
        ),
        (
            "a serving reading taken at the failure instant",
            reading(age=5 * MINUTE),
            T0 - 5 * MINUTE,
            None,
        ),
        ("a fresh refusal", limited(), T0 - 5 * MINUTE, None),
        ("no reading at all", None, T0 - 5 * MINUTE, None),
        ("a stale serving reading", reading(age=2 * HOUR), T0 - 5 * MINUTE, None),
        ("failure just before the reset", _reset_reading(), RESET - SECOND, Verdict.WINDOW_RESET),
        # A reset jitters by seconds: a refusal within a minute of it belongs to the
        # instance that reset ends, so the reset readmits; later, it was refused again.
        ("failure exactly at the reset", _reset_reading(), RESET, Verdict.WINDOW_RESET),
        ("failure within the jitter", _reset_reading(), RESET + 2 * SECOND, Verdict.WINDOW_RESET),
        ("failure at the tolerance", _reset_reading(), RESET + MINUTE, Verdict.WINDOW_RESET),
        ("failure past the tolerance", _reset_reading(), RESET + MINUTE + SECOND, None),
        (
            "reset instant equal to now has elapsed",
            limited(age=50 * MINUTE, resets_in=timedelta(0)),
            T0 - 10 * MINUTE,
            Verdict.WINDOW_RESET,
        ),
        (
            "a stale refusal whose reset is still ahead",
            limited(age=2 * HOUR, resets_in=HOUR),
            T0 - 5 * MINUTE,
            None,
        ),
        (
            "a refused token has no window to wait out",
            Reading(fetched_at=T0 - 2 * HOUR, status=ReadingStatus.INVALID_TOKEN),
            T0 - 5 * MINUTE,
            None,
        ),
    ],
)
def test_recovery_verdict(
    case: str, subject: Reading | None, last_failure_at: datetime, verdict: Verdict | None
) -> None:
    assert (
        recovery_verdict(subject, now=T0, max_age=MAX_AGE, last_failure_at=last_failure_at)
        is verdict
    ), case


def test_a_reset_only_counts_once_every_blocked_window_has_reset() -> None:
    both_full = reading(
        five_hour=100,
        five_hour_status="rejected",
        five_hour_resets_in=-MINUTE,
        seven_day=100,
        seven_day_status="rejected",
        seven_day_resets_in=HOUR,
        status=ReadingStatus.RATE_LIMITED,
        age=2 * HOUR,
    )
    verdict = recovery_verdict(both_full, now=T0, max_age=MAX_AGE, last_failure_at=T0 - 90 * MINUTE)
    assert verdict is None


# The earliest known reset


@pytest.mark.parametrize(
    ("case", "subjects", "expected"),
    [
        ("the soonest of two", [limited(resets_in=2 * HOUR), limited(resets_in=HOUR)], T0 + HOUR),
        (
            "a reset equal to now is not reported",
            [limited(resets_in=timedelta(0)), limited(resets_in=2 * HOUR)],
            T0 + 2 * HOUR,
        ),
        ("only past resets: none", [limited(resets_in=-MINUTE), limited(resets_in=-HOUR)], None),
        ("healthy readings name no reset", [reading(), None], None),
        ("nothing known", [], None),
    ],
)
def test_earliest_known_reset_is_never_in_the_past(
    case: str, subjects: list[Reading | None], expected: datetime | None
) -> None:
    assert earliest_known_reset(subjects, now=T0) == expected, case


def test_a_credential_blocked_on_two_windows_serves_after_the_later_reset() -> None:
    both = reading(
        five_hour=100,
        five_hour_status="rejected",
        five_hour_resets_in=HOUR,
        seven_day=100,
        seven_day_status="rejected",
        seven_day_resets_in=2 * 24 * HOUR,
        status=ReadingStatus.RATE_LIMITED,
    )
    assert earliest_known_reset([both], now=T0) == T0 + 2 * 24 * HOUR
