"""How long a throttled subscription backs off.

Pure, no Django and no Redis. A throttle is a 429 that carried no quota evidence (no
reset, no window): no quota window limits, so the subscription backs off briefly and
the backoff doubles while throttles keep coming.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

# The ``limiting_window`` a throttle is recorded with.
THROTTLE = "throttle"
THROTTLE_FIRST_BACKOFF = timedelta(minutes=1)
THROTTLE_MAX_BACKOFF = timedelta(minutes=15)
# A throttle continues a streak only when it follows the previous one this closely:
# twice the longest backoff, so a plan readmitted after 15 minutes and throttled at
# once still doubles, while one throttled again next hour starts over at a minute.
THROTTLE_STREAK_GAP = 2 * THROTTLE_MAX_BACKOFF


def throttle_backoff(earlier: Iterable[tuple[str, datetime]], *, now: datetime) -> timedelta:
    """How long a throttled subscription backs off: 1 minute, doubling per consecutive
    throttle, at most 15 minutes.

    ``earlier`` is the subscription's earlier refusals as (limiting_window, occurred_at),
    newest first. The streak counts throttles back from ``now`` while each follows the
    previous within ``THROTTLE_STREAK_GAP``; any other refusal ends it.
    """
    streak = 0
    later = now
    for window, at in earlier:
        if window != THROTTLE or later - at > THROTTLE_STREAK_GAP:
            break
        streak += 1
        later = at
        if THROTTLE_FIRST_BACKOFF * 2**streak >= THROTTLE_MAX_BACKOFF:
            break
    return min(THROTTLE_FIRST_BACKOFF * 2**streak, THROTTLE_MAX_BACKOFF)
