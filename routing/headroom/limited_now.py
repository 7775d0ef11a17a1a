"""Whether the provider limits a subscription now: a usable reading decides, and only
without one the recent refusal events do.

Pure, no Django and no Redis. The display, the walk's pre-dispatch check and the
ranking's readmission read this one rule, so they agree on one reading.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from routing.headroom.classification import Gate, Tier, classify_headroom
from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.recovery import Verdict, recovery_verdict, superseded
from routing.headroom.windows import FAMILY_WINDOW_PREFIX


def reading_says_limited(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    last_refusal_at: datetime | None = None,
    family: str | None = None,
    refusal_window: str | None = None,
) -> bool | None:
    """True/False when a usable reading decides whether the provider limits now, else None.

    A healthy reading taken at or before the latest refusal decides nothing: the
    refusal is newer. An ``invalid_token`` reading is not about rate limits. With
    ``family`` (a turn's family window) that window's block limits too. A healthy
    reading that does not describe the family window the refusal named
    (``refusal_window``) decides nothing either: a served Opus turn's headers say
    nothing about the Sonnet week, and absence of evidence readmits nothing.
    """
    headroom = classify_headroom(reading, now=now, max_age=max_age, family=family)
    if reading is None or headroom.gate is not Gate.USABLE:
        return None
    if reading.status is ReadingStatus.RATE_LIMITED:
        return True
    if reading.status is not ReadingStatus.OK:
        return None
    if headroom.tier is Tier.REFUSING:
        return True
    if superseded(reading, last_refusal_at):
        return None
    if (
        refusal_window is not None
        and refusal_window.startswith(FAMILY_WINDOW_PREFIX)
        and refusal_window not in reading.windows
    ):
        return None
    return False


def resolve_rate_limited_now(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    events_say_limited: Callable[[], bool],
    last_refusal_at: datetime | None = None,
    refusal_resets_at: datetime | None = None,
    family: str | None = None,
    refusal_window: str | None = None,
) -> bool:
    """Three-state: a usable reading decides; only without one do the 2h events decide.

    The two sources are never OR'd, and ``events_say_limited`` is called only when
    the reading cannot decide. Without a usable reading, an elapsed reset that the
    refusal predates (the reading's blocked window, or the refusal's own reset)
    means the quota is back: the same evidence that readmits a candidate in
    ``recovery_verdict``, so display, pre-dispatch and ranking agree on one reading.
    ``family`` is the turn's family window (None for the display): its block limits
    too. The caller passes only a refusal that blocks that family (``refusal_blocks``).
    """
    decided = reading_says_limited(
        reading,
        now=now,
        max_age=max_age,
        last_refusal_at=last_refusal_at,
        family=family,
        refusal_window=refusal_window,
    )
    if decided is not None:
        return decided
    if (
        recovery_verdict(
            reading,
            now=now,
            max_age=max_age,
            last_failure_at=last_refusal_at,
            family=family,
            refusal_resets_at=refusal_resets_at,
        )
        is Verdict.WINDOW_RESET
    ):
        return False
    return events_say_limited()
