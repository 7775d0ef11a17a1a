"""Table tests for which reading the store keeps (``reading.py``), boundaries included."""

from __future__ import annotations

import pytest

from routing.headroom.reading import Reading, ReadingStatus, reading_replaces
from tests.headroom.readings import T0, limited, reading


@pytest.mark.parametrize(
    ("prior", "new", "replaces"),
    [
        (None, Reading(fetched_at=T0, status=ReadingStatus.ERROR), True),  # nothing to keep
        (reading(), Reading(fetched_at=T0, status=ReadingStatus.ERROR), False),
        (limited(), Reading(fetched_at=T0, status=ReadingStatus.ERROR), False),  # keeps its reset
        (Reading(fetched_at=T0, status=ReadingStatus.ERROR), reading(), True),
        (reading(), limited(), True),
    ],
)
def test_an_error_reading_never_replaces_an_answer(
    prior: Reading | None, new: Reading, replaces: bool
) -> None:
    assert reading_replaces(prior, new) is replaces
