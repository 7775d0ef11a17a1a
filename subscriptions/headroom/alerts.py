"""Headroom alerts: one notification per window per level when a window fills up.

The dedup key names the window instance (its reset, rounded to the jitter tolerance:
``instances.window_instance``), so the next window can alert again; the TTL lasts until
that reset.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from routing.headroom.alert_crossings import AlertCrossing, AlertLevel, alert_crossings
from routing.headroom.instances import window_instance
from routing.headroom.reading import Reading
from trinity.models import Notification
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

KIND = "headroom_alert"
WINDOW_LABELS = {"five_hour": "5-hour window", "seven_day": "weekly window"}
_LEVELS = {
    AlertLevel.WARNING: Notification.Level.WARNING,
    AlertLevel.CRITICAL: Notification.Level.CRITICAL,
}
# Without a known reset, stay quiet for a week (the longest window).
_UNKNOWN_RESET_TTL = 7 * 24 * 3600


def dedup_key(subscription_id: int, crossing: AlertCrossing) -> str:
    # The instance, not the exact second: a jittered reset (:00, :59, :57) is one window.
    instance = window_instance(crossing.resets_at) if crossing.resets_at else "open"
    return f"headroom:{subscription_id}:{crossing.window}:{crossing.level.value}:{instance}"


def _ttl(crossing: AlertCrossing, now: datetime) -> int:
    if crossing.resets_at is None:
        return _UNKNOWN_RESET_TTL
    return max(60, int((crossing.resets_at - now).total_seconds()))


def headroom_alerts_send(
    *, readings: Mapping[int, Reading], names: Mapping[int, str], threshold: int, now: datetime
) -> list[Notification]:
    """Send the alerts the readings call for; returns the notifications actually sent."""
    sent: list[Notification] = []
    for subscription_id, reading in readings.items():
        for crossing in alert_crossings(reading, threshold=threshold):
            name = names.get(subscription_id, f"subscription {subscription_id}")
            label = WINDOW_LABELS.get(
                crossing.window, crossing.window.replace("_", " ") + " window"
            )
            resets = (
                f" It resets at {crossing.resets_at:%Y-%m-%d %H:%M} UTC."
                if crossing.resets_at
                else ""
            )
            note = notification_send(
                kind=KIND,
                level=_LEVELS[crossing.level],
                title=f"{name}: {label} at {crossing.utilization:.1f}%",
                body=f"{name} has used {crossing.utilization:.1f}% of its {label}.{resets}",
                subscription_id=subscription_id,
                dedup_key=dedup_key(subscription_id, crossing),
                dedup_ttl=_ttl(crossing, now),
                data={
                    "window": crossing.window,
                    "level": crossing.level.value,
                    "utilization": crossing.utilization,
                    "threshold": threshold,
                },
                now=now,
            )
            if note is not None:
                sent.append(note)
    return sent
