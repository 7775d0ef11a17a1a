"""Whether a refused subscription serves again, and from when: the readmission verdict
and the earliest known reset.

Pure, no Django and no Redis. Absence of evidence readmits nothing: only a fresh
serving reading taken after the refusal, or a reset that has passed since it, does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum

from routing.headroom.classification import Gate, Headroom, Tier, classify_headroom
from routing.headroom.instances import refused_after_reset
from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.windows import turn_windows


class Verdict(StrEnum):
    SERVING_NOW = "serving_now"
    WINDOW_RESET = "window_reset"


def superseded(reading: Reading, last_refusal_at: datetime | None) -> bool:
    """Whether a refusal recorded at ``last_refusal_at`` is newer evidence than ``reading``."""
    return last_refusal_at is not None and reading.fetched_at <= last_refusal_at


def binding_reset(reading: Reading, family: str | None) -> datetime | None:
    """When a limited reading's refusal lifts: the latest reset of its blocked windows
    (those a turn of ``family`` spends) and of a rate-limited reading's own reset."""
    latest = reading.reset_at if reading.status is ReadingStatus.RATE_LIMITED else None
    windows = reading.windows
    for name in turn_windows(family):
        window = windows.get(name)
        if window is None or window.resets_at is None or not window.blocking:
            continue
        if latest is None or window.resets_at > latest:
            latest = window.resets_at
    return latest


def readmission_verdict(
    reading: Reading | None,
    headroom: Headroom,
    now: datetime,
    last_failure_at: datetime | None,
    family: str | None,
    refusal_resets_at: datetime | None = None,
) -> Verdict | None:
    """``recovery_verdict`` given the reading's classification at ``now`` (``headroom``:
    the ranking has it already). Positional: the ranking calls it per skip-listed
    candidate."""
    if reading is not None and headroom.gate is Gate.USABLE:
        if headroom.tier is Tier.REFUSING:
            # A fresh refusal is the strongest evidence; no instant overrules it.
            return None
        if not superseded(reading, last_failure_at):
            return Verdict.SERVING_NOW
    binding = binding_reset(reading, family) if reading is not None else None
    for reset in (binding, refusal_resets_at):
        if reset is None or reset > now:
            continue
        if last_failure_at is not None and refused_after_reset(reset, last_failure_at):
            # Refused again after that reset: the reset did not bring the quota back.
            # (A refusal within the jitter of the reset belongs to the instance it ends.)
            continue
        return Verdict.WINDOW_RESET
    return None


def recovery_verdict(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    last_failure_at: datetime | None,
    family: str | None = None,
    refusal_resets_at: datetime | None = None,
) -> Verdict | None:
    """Why a skip-listed subscription may be tried again, or None.

    ``serving_now``: a fresh reading, taken after the failure, says it serves.
    ``window_reset``: no fresh serving reading, but a reset has elapsed that is later
    than the failure: the reading's blocked window's, or the one the refusal itself
    carried (``refusal_resets_at``). A fresh refusing reading readmits nothing, and
    neither does anything else.
    """
    headroom = classify_headroom(reading, now=now, max_age=max_age, family=family)
    return readmission_verdict(reading, headroom, now, last_failure_at, family, refusal_resets_at)


def earliest_known_reset(
    readings: Iterable[Reading | None],
    *,
    now: datetime,
    family: str | None = None,
    refusal_resets: Iterable[datetime | None] = (),
) -> datetime | None:
    """The soonest instant after ``now`` at which a limited credential serves again.

    Read from the readings' blocked windows and from the resets refusals carried.
    Never an instant at or before ``now``; None when nothing names one.
    """
    found: datetime | None = None
    instants = [binding_reset(r, family) for r in readings if r is not None]
    for instant in (*instants, *refusal_resets):
        if instant is not None and instant > now and (found is None or instant < found):
            found = instant
    return found
