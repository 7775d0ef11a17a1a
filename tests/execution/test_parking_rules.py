"""The parking rule as a table: which exhausted turns wait for a reset, and until when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routing.planner.park import park_until

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HOUR = 3600


@pytest.mark.parametrize(
    ("autonomous", "waits", "max_wait", "resets_at", "expected"),
    [
        # An autonomous turn of a waiting agent parks until a known reset within reach.
        (True, True, 6 * HOUR, NOW + timedelta(hours=2), NOW + timedelta(hours=2)),
        (True, True, 6 * HOUR, NOW + timedelta(seconds=1), NOW + timedelta(seconds=1)),
        # The boundary: a reset exactly max_wait away still parks; a second more fails.
        (True, True, 6 * HOUR, NOW + timedelta(hours=6), NOW + timedelta(hours=6)),
        (True, True, 6 * HOUR, NOW + timedelta(hours=6, seconds=1), None),
        (True, True, 0, NOW + timedelta(seconds=1), None),
        # An unknown reset never parks.
        (True, True, 6 * HOUR, None, None),
        # A reset equal to now, or past, is not one to wait for.
        (True, True, 6 * HOUR, NOW, None),
        (True, True, 6 * HOUR, NOW - timedelta(minutes=1), None),
        # The fail policy fails at once.
        (True, False, 6 * HOUR, NOW + timedelta(hours=2), None),
        # An interactive turn never parks: someone is waiting for the answer.
        (False, True, 6 * HOUR, NOW + timedelta(hours=2), None),
        (False, False, 6 * HOUR, NOW + timedelta(hours=2), None),
    ],
)
def test_an_exhausted_turn_parks_only_when_autonomous_waiting_and_the_reset_is_known_and_near(
    autonomous: bool,
    waits: bool,
    max_wait: int,
    resets_at: datetime | None,
    expected: datetime | None,
) -> None:
    assert (
        park_until(
            autonomous=autonomous,
            waits=waits,
            max_wait_seconds=max_wait,
            resets_at=resets_at,
            created_at=NOW,
            now=NOW,
        )
        == expected
    )


@pytest.mark.parametrize(
    ("created_ago", "resets_in", "expected_parks"),
    [
        # A re-run refused again parks again only within the allowance since creation.
        (timedelta(hours=4), timedelta(hours=2), True),  # exactly 6 h after creation
        (timedelta(hours=4), timedelta(hours=2, seconds=1), False),
        (timedelta(hours=6), timedelta(seconds=1), False),
    ],
)
def test_the_wait_counts_from_the_turns_creation_so_it_never_parks_without_end(
    created_ago: timedelta, resets_in: timedelta, expected_parks: bool
) -> None:
    until = park_until(
        autonomous=True,
        waits=True,
        max_wait_seconds=6 * HOUR,
        resets_at=NOW + resets_in,
        created_at=NOW - created_ago,
        now=NOW,
    )
    assert (until is not None) is expected_parks
