"""Applying the planner's ``Park`` and ``Fail``, and finishing a row the loop could not
(a failed turn, a lost database connection)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connection

from agents.client import TurnOutcome
from execution import parking
from execution.models import Execution, Status
from execution.turn_state import TurnState
from routing.planner import Fail, Park
from subscriptions.key_spend import BudgetClosed, key_budget_notify
from trinity import clock
from trinity.notifications import notification_send
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

ERROR_DETAIL_MAX = 2000
EXHAUSTED_NOTICE_TTL = 3600


def ended(state: TurnState, action: Park | Fail) -> Execution:
    """Park or fail the turn as planned, telling the operator what the plan says to."""
    now = clock.now()
    execution, agent = state.execution, state.agent
    state.exhausted = state.exhausted or action.exhausted
    if action.key_closed is not None:
        assert isinstance(action.key_closed, BudgetClosed)  # noqa: S101 - the key state's
        key_budget_notify(closed=action.key_closed, agent=agent, now=now)
    execution.walk_stop = action.walk_stop
    execution.attempts = state.attempts
    spend_record(execution, state.last_outcome)
    if isinstance(action, Park):
        return parking.execution_park(
            execution=execution, agent=agent, until=action.until, detail=action.detail, now=now
        )
    if action.notify_exhausted:
        _notify_exhausted(state, action.detail, action.resets_at, now)
    execution.resets_at = action.resets_at
    return finish_failed(execution, error_code=action.error_code, detail=action.detail)


def spend_record(execution: Execution, outcome: TurnOutcome | None) -> None:
    """A turn that fails after its requests were served still spent them: its metered
    tokens and cost are recorded (an agent server that predates metering says none)."""
    if outcome is None or outcome.metered is None:
        return
    execution.input_tokens = outcome.metered.input_tokens
    execution.output_tokens = outcome.metered.output_tokens
    execution.cost_usd = outcome.metered.cost


def _notify_exhausted(
    state: TurnState, detail: str, resets_at: datetime | None, now: datetime
) -> None:
    agent = state.agent
    notification_send(
        kind="pool_exhausted",
        level="critical",
        title="No credential could serve a turn",
        body=f"Agent {agent.name!r}: {detail}"
        + (f" The earliest known reset is {resets_at.isoformat()}." if resets_at else ""),
        agent_name=agent.name,
        agent_id=agent.pk,
        dedup_key=f"pool-exhausted:{agent.pk}",
        dedup_ttl=EXHAUSTED_NOTICE_TTL,
        data={
            "trail": attempts_public(state),
            "earliest_reset": resets_at.isoformat() if resets_at else None,
        },
        now=now,
    )


def attempts_public(state: TurnState) -> list[dict[str, object]]:
    return [
        {k: a[k] for k in ("credential_kind", "name", "why", "outcome", "error_code")}
        for a in state.attempts
    ]


def finish_failed(execution: Execution, *, error_code: str, detail: str) -> Execution:
    execution.status = Status.FAILED
    execution.error_code = error_code
    execution.error_detail = redact(detail)[:ERROR_DETAIL_MAX]
    execution.finished_at = clock.now()
    execution.save()
    logger.info("turn %s on %s: failed %s", execution.pk, execution.agent_name, error_code)
    return execution


def finish_after_database_loss(execution: Execution) -> Execution:
    """Record a turn whose database connection died under it (a restart, a failover).

    Django health-checks a persistent connection only when a request or a task starts,
    so one the database dropped mid-turn stays dead for the rest of it: every write,
    the failure's own included, would raise and leave the row ``running`` until the
    reaper. So drop it and write on a fresh one. A plain served turn keeps what it
    served; anything else fails ``worker_lost`` (its outcome is unknown: a switch's
    commit may have been rolled back with the lost transaction). If the database is
    still down this raises, and the reaper remains the backstop.
    """
    logger.warning(
        "turn %s: the database connection was lost; finishing the row on a new one",
        execution.pk,
        exc_info=True,
    )
    connection.close()
    if execution.status == Status.SUCCEEDED and not execution.subscription_switch:
        execution.save()
        return execution
    return finish_failed(
        execution,
        error_code="worker_lost",
        detail="the database connection was lost while the turn ran; its outcome could not "
        "be recorded",
    )
