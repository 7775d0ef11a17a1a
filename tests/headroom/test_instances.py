"""Which window instance a reset names, as a table: jitter of a second or two is one
instance, a rollover is another; boundaries included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routing.headroom.instances import (
    RESET_MATCH,
    refused_after_reset,
    same_reset,
    window_instance,
)

RESET = datetime(2030, 1, 1, 17, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("case", "other", "same"),
    [
        ("the exact second", RESET, True),
        ("a second early (:59)", RESET - SECOND, True),
        ("three seconds early (:57)", RESET - 3 * SECOND, True),
        ("two seconds late", RESET + 2 * SECOND, True),
        ("29 s late: still the nearest minute", RESET + 29 * SECOND, True),
        ("31 s late: the next minute", RESET + 31 * SECOND, False),
        ("a 5-hour rollover", RESET + timedelta(hours=5), False),
    ],
)
def test_a_jittered_reset_names_the_same_window_instance(
    case: str, other: datetime, same: bool
) -> None:
    assert (window_instance(other) == window_instance(RESET)) is same, case


@pytest.mark.parametrize(
    ("case", "other", "same"),
    [
        ("within the tolerance", RESET + RESET_MATCH, True),
        ("a second past it", RESET + RESET_MATCH + SECOND, False),
        ("early within it", RESET - RESET_MATCH, True),
    ],
)
def test_same_reset_is_within_the_tolerance(case: str, other: datetime, same: bool) -> None:
    assert same_reset(RESET, other) is same, case


@pytest.mark.parametrize(
    ("case", "refused_at", "after"),
    [
        ("before the reset", RESET - 10 * SECOND, False),
        ("two seconds after a jittered reset", RESET + 2 * SECOND, False),
        ("at the tolerance", RESET + RESET_MATCH, False),
        ("past the tolerance", RESET + RESET_MATCH + SECOND, True),
    ],
)
def test_a_refusal_within_the_jitter_of_a_reset_belongs_to_the_instance_it_ends(
    case: str, refused_at: datetime, after: bool
) -> None:
    assert refused_after_reset(RESET, refused_at) is after, case
