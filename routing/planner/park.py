"""Whether a turn nobody waits for parks until a reset instead of failing. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta


def park_until(
    *,
    autonomous: bool,
    waits: bool,
    max_wait_seconds: int,
    resets_at: datetime | None,
    created_at: datetime,
    now: datetime,
) -> datetime | None:
    """The instant an exhausted turn parks until, or None when it fails instead.

    Only an autonomous turn (nobody is waiting for the answer) of an agent whose wait
    policy is ``wait`` parks, and only for a known reset in the future at most
    ``max_wait_seconds`` after the turn was created (the boundary parks). An unknown
    reset never parks: a turn parked on a guess could wait forever or re-run into the
    same refusal. The wait counts from creation, not from this refusal, so a re-run
    refused again parks again only within the same allowance, never without end.
    """
    if not autonomous or not waits or resets_at is None or resets_at <= now:
        return None
    if resets_at - created_at > timedelta(seconds=max_wait_seconds):
        return None
    return resets_at
