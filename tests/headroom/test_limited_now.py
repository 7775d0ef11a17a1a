"""Table tests for whether the provider limits a subscription now, boundaries included."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from routing.headroom.limited_now import resolve_rate_limited_now
from routing.headroom.reading import Reading, ReadingStatus
from tests.headroom.readings import T0, limited, reading

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
MAX_AGE = HOUR


# rate_limited_now: three-state, never OR'd


@pytest.mark.parametrize(
    ("case", "subject", "last_refusal_at", "events", "expected", "asks_events"),
    [
        ("fresh limited beats quiet events", limited(), None, False, True, False),
        ("fresh healthy beats a 2h event", reading(), None, True, False, False),
        ("no reading: the events decide (yes)", None, None, True, True, True),
        ("no reading: the events decide (no)", None, None, False, False, True),
        (
            "a stale limited reading decides nothing",
            limited(age=2 * HOUR),
            None,
            False,
            False,
            True,
        ),
        (
            "a limited reading whose reset is now: the quota is back, whatever the events",
            limited(resets_in=timedelta(0)),
            None,
            True,
            False,
            False,
        ),
        (
            "a limited reading whose reset passed, refused again after it: the events decide",
            limited(resets_in=-10 * MINUTE),
            T0 - 5 * MINUTE,
            True,
            True,
            True,
        ),
        (
            "a healthy reading older than the last refusal is superseded",
            reading(age=10 * MINUTE),
            T0 - 5 * MINUTE,
            True,
            True,
            True,
        ),
        (
            "a healthy reading newer than the last refusal decides",
            reading(age=5 * MINUTE),
            T0 - 10 * MINUTE,
            True,
            False,
            False,
        ),
        (
            "an invalid token is not about rate limits",
            Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
            None,
            True,
            True,
            True,
        ),
    ],
)
def test_resolve_rate_limited_now(
    case: str,
    subject: Reading | None,
    last_refusal_at: datetime | None,
    events: bool,
    expected: bool,
    asks_events: bool,
) -> None:
    asked: list[bool] = []

    def events_say_limited() -> bool:
        asked.append(True)
        return events

    result = resolve_rate_limited_now(
        subject,
        now=T0,
        max_age=MAX_AGE,
        events_say_limited=events_say_limited,
        last_refusal_at=last_refusal_at,
    )
    assert result is expected, case
    assert bool(asked) is asks_events, case


@pytest.mark.parametrize(
    ("case", "refusal_window", "family", "expected", "asks_events"),
    [
        (
            "a fresh reading without the Sonnet week cannot clear a Sonnet-week refusal",
            "seven_day_sonnet",
            "seven_day_sonnet",
            True,
            True,
        ),
        ("a core-window refusal is cleared by a fresh reading", "five_hour", None, False, False),
        ("a refusal of unknown window is cleared by a fresh reading", None, None, False, False),
    ],
)
def test_a_fresh_reading_clears_only_the_windows_it_describes(
    case: str, refusal_window: str | None, family: str | None, expected: bool, asks_events: bool
) -> None:
    asked: list[bool] = []

    def events_say_limited() -> bool:
        asked.append(True)
        return True

    result = resolve_rate_limited_now(
        reading(age=MINUTE),  # five_hour and seven_day only, as an Opus answer's headers
        now=T0,
        max_age=MAX_AGE,
        events_say_limited=events_say_limited,
        last_refusal_at=T0 - 5 * MINUTE,
        family=family,
        refusal_window=refusal_window,
    )
    assert result is expected, case
    assert bool(asked) is asks_events, case
