"""When the sampler probes a subscription again.

Pure, no Django and no Redis.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from routing.headroom.reading import CORE_WINDOWS, Reading, ReadingStatus


def probe_due(
    reading: Reading | None,
    *,
    now: datetime,
    interval: timedelta,
    limited_interval: timedelta,
    last_failure_at: datetime | None = None,
) -> bool:
    """Whether the sampler should probe now.

    Absent → due. A reading whose window has reset → due. Believed limited (a
    limited reading, a serving one with a blocked core window, or a refusal after the
    reading) → due after ``limited_interval``; otherwise after ``interval``. Both less a
    little slack, so a reading taken during the last sweep does not miss this one by a
    second.
    """
    if reading is None:
        return True
    if reading.reset_at is not None and reading.reset_at <= now:
        return True
    for window in reading.windows.values():
        if window.resets_at is not None and window.resets_at <= now:
            return True
    believed_limited = (
        reading.status is ReadingStatus.RATE_LIMITED
        or (
            reading.status is ReadingStatus.OK
            and any(
                window.blocking for name, window in reading.windows.items() if name in CORE_WINDOWS
            )
        )
        or (last_failure_at is not None and last_failure_at >= reading.fetched_at)
    )
    every = limited_interval if believed_limited else interval
    slack = min(every / 10, timedelta(seconds=30))
    return now - reading.fetched_at >= every - slack
