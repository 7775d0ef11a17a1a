"""Which windows of a reading are at or over the alert threshold, and at which level.

Pure, no Django and no Redis; ``alerts.py`` sends the notifications.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from routing.headroom.reading import Reading, ReadingStatus


class AlertLevel(StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"


CRITICAL_FLOOR = 90


@dataclass(frozen=True, slots=True)
class AlertCrossing:
    window: str
    level: AlertLevel
    utilization: float
    resets_at: datetime | None


def alert_crossings(reading: Reading, *, threshold: int) -> list[AlertCrossing]:
    """Windows at or over the alert threshold, each at the highest level it reached.

    ``threshold`` 0 turns alerts off; the critical level is max(threshold, 90).
    Only answered readings alert (an error carries no figures).
    """
    if threshold <= 0 or reading.status not in (ReadingStatus.OK, ReadingStatus.RATE_LIMITED):
        return []
    critical = max(threshold, CRITICAL_FLOOR)
    crossings = []
    for name, window in reading.windows.items():
        if window.utilization is None or window.utilization < threshold:
            continue
        level = AlertLevel.CRITICAL if window.utilization >= critical else AlertLevel.WARNING
        crossings.append(AlertCrossing(name, level, window.utilization, window.resets_at))
    return crossings
