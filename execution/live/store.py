"""Reading a turn's events after a given ``seq``: from the cache while the turn runs
(what its writer published, ``execution/live/events.py``), from the database once it
kept them (or when the cache lost them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache

from execution.live.events import event_key, head_key
from execution.live.turn_events import end_fields
from execution.models import FINISHED_STATUSES, Execution, ExecutionEvent

# At most this many events per read: a stream sends them and reads again.
PAGE = 200


def head_read(execution_id: str) -> int | None:
    """The last ``seq`` the running turn published (None: nothing in the cache)."""
    head = cache.get(head_key(execution_id))
    return head if isinstance(head, int) else None


def events_cached(execution_id: str, after: int) -> list[dict[str, Any]]:
    """What the running turn published after ``after`` (at most ``PAGE``), from the
    cache alone: [] when it holds nothing newer (or lost it)."""
    head = head_read(execution_id)
    if head is None or head <= after:
        return []
    seqs = range(after + 1, min(head, after + PAGE) + 1)
    found = cache.get_many([event_key(execution_id, s) for s in seqs])
    events = []
    for seq in seqs:
        event = found.get(event_key(execution_id, seq))
        if not isinstance(event, dict):
            break
        events.append(event)
    return events


def events_kept(execution_id: str, after: int) -> list[dict[str, Any]]:
    """The events the database keeps after ``after`` (at most ``PAGE``)."""
    rows = ExecutionEvent.objects.filter(execution_id=execution_id, seq__gt=after).order_by("seq")
    return [{"seq": row.seq, "kind": row.kind, "data": row.data} for row in rows[:PAGE]]


# A finished row without its ``end`` this long: its process was lost before writing
# it (a turn writes its events right after its row, in the same process).
UNANNOUNCED_AFTER = timedelta(seconds=10)


def ended_unannounced(execution_id: str, after: int, *, now: datetime) -> dict[str, Any] | None:
    """The ``end`` of a turn that finished without writing one (its process was lost:
    the reaper failed it), numbered after the last event read; else None. The caller
    found no event after ``after`` in the cache or the database."""
    row = (
        Execution.objects.filter(pk=execution_id)
        .only("status", "error_code", "error_detail", "response", "session_id", "finished_at")
        .first()
    )
    if row is None or row.status not in FINISHED_STATUSES:
        return None
    if row.finished_at is not None and row.finished_at > now - UNANNOUNCED_AFTER:
        return None
    return {
        "seq": after + 1,
        "kind": "end",
        "data": {"attempt": 0, **end_fields(row, served_by=None)},
    }
