"""A turn's events as it writes them: numbered, redacted, bounded, live in the cache
and kept in the database once the turn ends.

One writer per running turn (the process running it), so ``seq`` is a counter in
memory: from 1, up by 1, no gaps. Each event goes to the cache as it happens (one
``set_many`` of the event and the turn's head), which the streams read
(``execution/live/store.py``); the turn's end (or its parking) writes every event to
the database in one insert, where a finished turn is replayed from.

What the agent server passes on from the CLI is not trusted: only the contract's kinds
and fields are kept, every string is redacted and cut to its bound, and a turn keeps
at most ``MAX_CLI_EVENTS`` of them (then one ``truncated`` event says so, and the
rest are dropped and counted in the log). The platform's own events (sent, refused,
walking, served, committed, the end) are always kept: a walk is bounded by its rung
cap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import DatabaseError
from django.db.models import Max
from django.db.models.constants import OnConflict

from execution.models import ExecutionEvent
from trinity import clock
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

# Long enough for a parked turn's stream to be read from the cache; the database keeps
# every event once the turn ends or parks.
CACHE_TTL_SECONDS = 2 * 3600
MAX_CLI_EVENTS = 2000
# The bounds of a CLI event's strings (the agent server cuts them too).
TEXT_MAX = 4000
FIELD_MAX = {"id": 100, "name": 100, "input": 300, "output": 500}
MESSAGE_MAX = 4000
CLI_KINDS = frozenset({"text", "tool_call", "tool_result", "truncated"})
# The kinds after which a turn's stream closes (a parked turn runs again later).
FINAL_KINDS = frozenset({"end", "parked"})


def _insert_fields() -> list[Any]:
    return [
        ExecutionEvent._meta.get_field(name) for name in ("execution", "seq", "kind", "data", "at")
    ]


INSERT_FIELDS = _insert_fields()


def head_key(execution_id: str) -> str:
    return f"turn-events:{execution_id}:head"


def event_key(execution_id: str, seq: int) -> str:
    return f"turn-events:{execution_id}:{seq}"


def _cut(value: object, limit: int) -> str:
    text = redact(value if isinstance(value, str) else str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cli_event_fields(event: object) -> tuple[str, dict[str, Any]] | None:
    """The kind and fields the platform keeps of an agent server's event, or None for
    anything off the contract (dropped)."""
    if not isinstance(event, dict):
        return None
    kind = event.get("kind")
    if kind not in CLI_KINDS:
        return None
    if kind == "text":
        text = event.get("text")
        return ("text", {"text": _cut(text, TEXT_MAX)}) if isinstance(text, str) and text else None
    if kind == "truncated":
        dropped = event.get("dropped")
        return "truncated", {"dropped": dropped if isinstance(dropped, int) else 0}
    names = ("id", "name", "input") if kind == "tool_call" else ("id", "output")
    data: dict[str, Any] = {name: _cut(event.get(name) or "", FIELD_MAX[name]) for name in names}
    if kind == "tool_result":
        data["ok"] = event.get("ok") is True
    return str(kind), data


@dataclass
class TurnEvents:
    """The events one running turn writes (``state.events``)."""

    execution_id: str
    seq: int = 0
    # The attempt the CLI's events belong to (0 before the first send).
    attempt: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)
    unsaved: list[dict[str, Any]] = field(default_factory=list)
    cli_kept: int = 0
    cli_dropped: int = 0
    # The rung that served (its public kind and name), for the ``end`` event.
    served_by: dict[str, str] | None = None

    def add(self, kind: str, **data: Any) -> None:
        """Buffer one event (written by the next ``flush``)."""
        self.seq += 1
        data.setdefault("attempt", self.attempt)
        data["at"] = clock.now().isoformat()
        self.pending.append({"seq": self.seq, "kind": kind, "data": data})

    def flush(self) -> None:
        """Put the buffered events in the cache, with the turn's head; never raises (a
        lost cache costs the live view, never the turn)."""
        if not self.pending:
            return
        values: dict[str, Any] = {event_key(self.execution_id, e["seq"]): e for e in self.pending}
        values[head_key(self.execution_id)] = self.seq
        try:
            cache.set_many(values, timeout=CACHE_TTL_SECONDS)
        except Exception:  # noqa: BLE001 - the live view is best effort
            logger.warning("turn %s: could not publish its events", self.execution_id)
        self.unsaved.extend(self.pending)
        self.pending = []

    def cli(self, event: object) -> None:
        """One event the agent server passed on from the CLI: kept (bounded) and
        published at once. Past the bound, one ``truncated`` event says so and the
        rest of the turn's CLI events are dropped (the turn itself goes on)."""
        fields = cli_event_fields(event)
        if fields is None:
            return
        if self.cli_kept >= MAX_CLI_EVENTS:
            if not self.cli_dropped:
                self.add("truncated", limit=MAX_CLI_EVENTS)
                self.flush()
            self.cli_dropped += 1
            return
        self.cli_kept += 1
        kind, data = fields
        self.add(kind, **data)
        self.flush()

    def keep(self) -> None:
        """Publish what is buffered and write every event not yet in the database;
        never raises (the row's outcome stands without its events)."""
        if self.cli_dropped:
            logger.info("turn %s: %d CLI events dropped", self.execution_id, self.cli_dropped)
            self.cli_dropped = 0
        self.flush()
        if not self.unsaved:
            return
        rows = [
            ExecutionEvent(
                execution_id=self.execution_id,
                seq=e["seq"],
                kind=e["kind"],
                data=e["data"],
                at=e["data"]["at"],
            )
            for e in self.unsaved
        ]
        try:
            # One INSERT and no transaction around it (bulk_create would add BEGIN and
            # COMMIT round trips to every served turn); a parked turn running again
            # never rewrites what it kept.
            ExecutionEvent.objects._insert(  # type: ignore[attr-defined]
                rows, fields=INSERT_FIELDS, on_conflict=OnConflict.IGNORE
            )
        except DatabaseError:
            logger.warning("turn %s: could not keep its events", self.execution_id)
            return
        self.unsaved = []


def turn_events_open(execution_id: str, *, again: bool) -> TurnEvents:
    """The writer of a turn about to run. A turn running ``again`` (a parked one)
    continues its numbering from what it kept; a new one starts at 1, with no query."""
    events = TurnEvents(execution_id=execution_id)
    if again:
        kept = ExecutionEvent.objects.filter(execution_id=execution_id).aggregate(n=Max("seq"))
        events.seq = kept["n"] or 0
    return events
