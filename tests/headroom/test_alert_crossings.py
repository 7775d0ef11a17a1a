"""Table tests for the alert crossings (``alert_crossings.py``), boundaries included."""

from __future__ import annotations

import pytest

from routing.headroom.alert_crossings import AlertLevel, alert_crossings
from routing.headroom.reading import Reading, ReadingStatus, WindowReading
from tests.headroom.readings import T0, reading


@pytest.mark.parametrize(
    ("threshold", "utilization", "level"),
    [
        (0, 99.0, None),  # off
        (75, 74.9, None),
        (75, 75.0, AlertLevel.WARNING),
        (75, 89.9, AlertLevel.WARNING),
        (75, 90.0, AlertLevel.CRITICAL),
        (95, 94.9, None),
        (95, 95.0, AlertLevel.CRITICAL),  # escalation at max(threshold, 90)
    ],
)
def test_alert_levels_at_their_edges(
    threshold: int, utilization: float, level: AlertLevel | None
) -> None:
    crossings = alert_crossings(reading(five_hour=0, seven_day=utilization), threshold=threshold)
    assert [c.level for c in crossings if c.window == "seven_day"] == ([level] if level else [])


def test_a_failed_probe_alerts_nothing() -> None:
    failed = Reading(
        fetched_at=T0,
        status=ReadingStatus.ERROR,
        windows={"seven_day": WindowReading(99.0, None, "allowed")},
    )
    assert alert_crossings(failed, threshold=75) == []
