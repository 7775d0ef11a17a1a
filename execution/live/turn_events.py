"""What the executor tells a turn's stream: the platform's own events, in the words of
the contract (``docs/flows/live-turns.md``): the turn, each attempt sent, refused or
served, the walk to the next rung, the committed switch, and the end."""

from __future__ import annotations

import logging
from typing import Any

from agents.client import TurnOutcome
from execution.live.events import MESSAGE_MAX, TurnEvents
from execution.models import Execution, Status
from routing.rung import Rung
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)


def rung_public(rung: Rung | None) -> dict[str, str]:
    """A rung as an event names it: its kind and name, never its secret."""
    if rung is None:
        return {"kind": "none", "name": "its own credential"}
    return {"kind": rung.kind.value, "name": rung.name}


def turn_begun(events: TurnEvents, execution: Execution) -> None:
    """The first event of a new turn (seq 1)."""
    events.add(
        "turn",
        execution_id=str(execution.pk),
        agent=execution.agent_name,
        session_id=execution.session_id or None,
        message=redact(execution.message[:MESSAGE_MAX]),
    )


def attempt_sent(events: TurnEvents, rung: Rung | None, why: str, *, walked: bool) -> None:
    """An attempt is about to go to the agent server; a walk names where it goes first
    (the text of the attempt before it is superseded)."""
    events.attempt += 1
    if walked:
        events.add("walking", to=rung_public(rung), why=why)
    events.add("sent", on=rung_public(rung), why=why)
    events.flush()


def attempt_answered(events: TurnEvents, rung: Rung | None, outcome: TurnOutcome) -> None:
    if outcome.ok:
        events.served_by = rung_public(rung)
        events.add("served", by=events.served_by)
    elif outcome.error_code != "cancelled":
        events.add(
            "refused",
            by=rung_public(rung),
            error_code=outcome.error_code,
            resets_at=outcome.resets_at.isoformat() if outcome.resets_at else None,
        )


def turn_ended(events: TurnEvents, execution: Execution) -> None:
    """The turn's last events (a committed switch, then ``end``, or ``parked``), and
    every event kept in the database. Never raises."""
    try:
        switch: dict[str, Any] = execution.subscription_switch or {}
        if execution.status == Status.SUCCEEDED and switch.get("committed"):
            events.add(
                "committed",
                **{"from": switch.get("from_name"), "to": switch.get("to_name")},
                explanation=switch.get("explanation") or "",
            )
        if execution.status == Status.PARKED:
            until = execution.parked_until
            events.add("parked", until=until.isoformat() if until else None)
        else:
            events.add("end", **end_fields(execution, served_by=events.served_by))
        events.keep()
    except Exception:
        logger.exception("turn %s: could not write its last events", execution.pk)


def end_fields(execution: Execution, *, served_by: dict[str, str] | None) -> dict[str, Any]:
    """The ``end`` event of a finished row (what its stream closes on)."""
    return {
        "status": execution.status,
        "error_code": execution.error_code,
        "error_detail": execution.error_detail,
        "response": execution.response,
        "served_by": served_by if execution.status == Status.SUCCEEDED else None,
        "session_id": execution.session_id or None,
    }
