"""Cancelling a turn: ``POST /api/executions/{id}/cancel`` (its owner or an admin).

A queued or parked turn is cancelled before it runs, by a compare-and-set on its
status (the worker's claim and the unpark are compare-and-sets too, so exactly one of
them wins). A running turn is marked (its row's ``cancel_requested_at`` and a cache
flag the executor reads before each send) and its agent server is told to kill the
turn's CLI with everything it started; the agent server also remembers the id, so an
attempt that reaches it later is refused at once. The executor then ends the turn
``cancelled``: nothing committed, no refusal recorded (the planner never sees the
cancelled attempt), its lease and breaker trial given back, its key reservation
settled with what was really spent.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.core.cache import cache

from agents import lifecycle
from agents.client import AgentServerUnavailable
from execution.finishing import spend_record
from execution.live.events import turn_events_open
from execution.live.turn_events import end_fields, turn_begun
from execution.models import Execution, Status
from execution.turn_state import TurnState
from trinity import clock
from trinity.errors import Finished

logger = logging.getLogger(__name__)

CANCELLED = "cancelled"


class TurnCancelled(Exception):
    """Raised in the executor when the turn was cancelled: it ends ``cancelled``."""


def _flag_key(execution_id: str) -> str:
    return f"turn-cancel:{execution_id}"


def cancel_requested(execution_id: str) -> bool:
    """Whether someone asked to cancel the running turn (one cache GET)."""
    try:
        return cache.get(_flag_key(execution_id)) is not None
    except Exception:  # noqa: BLE001 - without the cache, the agent server still kills it
        return False


def finish_cancelled(state: TurnState, cancelled: TurnCancelled) -> Execution:
    """End the running turn ``cancelled``, keeping what its attempts spent."""
    execution = state.execution
    requested = Execution.objects.filter(pk=execution.pk).values_list(
        "cancel_requested_at", flat=True
    )
    execution.cancel_requested_at = requested.first() or clock.now()
    execution.attempts = state.attempts
    spend_record(execution, state.last_outcome)
    execution.status = Status.CANCELLED
    execution.error_code = CANCELLED
    execution.error_detail = "Its CLI and everything the CLI started were stopped."
    execution.finished_at = clock.now()
    execution.save()
    logger.info("turn %s on %s: cancelled (%s)", execution.pk, execution.agent_name, cancelled)
    return execution


def execution_cancel(*, execution: Execution, now: datetime) -> Execution:
    """Cancel ``execution`` (already checked visible to the caller); returns its row.

    Raises Finished (409) when it already finished."""
    if execution.status in (Status.QUEUED, Status.PARKED):
        waiting = Execution.objects.filter(pk=execution.pk, status=execution.status).update(
            status=Status.CANCELLED,
            error_code=CANCELLED,
            error_detail="It was stopped before it ran.",
            cancel_requested_at=now,
            finished_at=now,
        )
        if waiting:
            row = Execution.objects.get(pk=execution.pk)
            _waiting_turn_ended(row)
            return row
        execution.refresh_from_db()
    if execution.status == Status.RUNNING:
        return _running_cancel(execution, now)
    raise Finished(f"The turn already finished ({execution.status}).")


def _running_cancel(execution: Execution, now: datetime) -> Execution:
    Execution.objects.filter(
        pk=execution.pk, status=Status.RUNNING, cancel_requested_at__isnull=True
    ).update(cancel_requested_at=now)
    execution_id = str(execution.pk)
    ttl = settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS + 3600
    cache.set(_flag_key(execution_id), now.isoformat(), timeout=ttl)
    agent = execution.agent
    if agent is not None and agent.endpoint:
        try:
            killed = lifecycle.client_for(agent).cancel_turn(execution_id=execution_id)
            logger.info(
                "turn %s: cancel sent to its agent server (killed=%s)", execution_id, killed
            )
        except AgentServerUnavailable as exc:
            # The flag still stops it at its next step; the deadline is the backstop.
            logger.warning(
                "turn %s: its agent server was not told to cancel: %s", execution_id, exc
            )
    execution.refresh_from_db()
    return execution


def _waiting_turn_ended(execution: Execution) -> None:
    """A turn cancelled before it ran still has a stream: its first event (if it never
    started) and its end."""
    events = turn_events_open(str(execution.pk), again=True)
    if events.seq == 0:
        turn_begun(events, execution)
    events.add("end", **end_fields(execution, served_by=None))
    events.keep()
