"""Turns as services: create the Execution, admit it under its agent's cap, dispatch it
now or hand it to a worker, claim it there, reap the lost ones.

The dispatch itself is the executor's (``execution/turn.py``), which loops on the
turn planner (``routing/planner``): every routing decision is made there. One
dispatch loop serves task and chat, sync and async.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from execution import handover, key_reservation, parking
from execution.deadlines import DEADLINE_SLACK, turn_timeout
from execution.finishing import EXHAUSTED_NOTICE_TTL as EXHAUSTED_NOTICE_TTL
from execution.finishing import finish_failed
from execution.models import Execution, Schedule, Status
from execution.served import KEY_NOTICE_TTL as KEY_NOTICE_TTL
from execution.turn import turn_dispatch
from routing.planner import EXHAUSTED_STOPS as EXHAUSTED_STOPS
from trinity import clock, metrics
from trinity.errors import TooManyTurns
from trinity_contract.log_json import log_context

logger = logging.getLogger(__name__)


def execution_create(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    session_id: str = "",
    queued: bool = False,
    schedule: Schedule | None = None,
) -> Execution:
    """Create the turn's row: ``running`` (about to dispatch) or ``queued`` (async).

    The deadline covers the whole turn, walk included; the reaper fails a row left
    ``running`` past it. ``schedule`` is the schedule that fired it, if one did.
    """
    now = clock.now()
    timeout = turn_timeout(timeout_seconds)
    return Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        trigger=trigger,
        message=message,
        model=model or "",
        session_id=session_id,
        status=Status.QUEUED if queued else Status.RUNNING,
        created_at=now,
        deadline=now + timedelta(seconds=timeout) + DEADLINE_SLACK,
        dispatched_at=None if queued else now,
        schedule=schedule,
    )


# A refused turn may come back this soon: in-flight turns finish in seconds to minutes.
TURN_RETRY_AFTER_SECONDS = 5


def execution_admit(*, execution: Execution, record_refusal: bool) -> None:
    """Admit a committed turn under its agent's ``TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT``
    (queued plus running, this turn included), or withdraw it and raise TooManyTurns.

    Call it once the turn's row is committed. A withdrawn turn is deleted (its caller
    is answered 429 and was never told its id), or with ``record_refusal`` recorded as
    a failed turn (``too_many_turns``), for a turn with no caller to answer.

    The served path pays one statement, a count on the partial index
    ``execution_agent_in_flight``, with no lock: counted after the commit, of two turns
    racing for the last place the later counter sees the other's row, so the quick
    count can admit too few, never too many. Over the cap on that count (a burst, or a
    full agent), the turn is decided again under a lock on the agent's row, where the
    refused leave the count before the next decides: a burst of N admits exactly
    min(N, room), never more in any process.
    """
    if _in_flight(execution) <= settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT:
        return
    agent_id = execution.agent_id
    assert agent_id is not None  # noqa: S101 - a turn being admitted was just created on it
    with transaction.atomic():
        Agent.objects.select_for_update().filter(pk=agent_id).values_list("pk").first()
        limit = settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT
        if _in_flight(execution) <= limit:
            return
        refusal = TooManyTurns(
            f"Agent {execution.agent_name!r} is at its cap of {limit} queued or running "
            "turns; retry when one finishes.",
            retry_after=TURN_RETRY_AFTER_SECONDS,
        )
        if record_refusal:
            finish_failed(execution, error_code=TooManyTurns.code, detail=refusal.message)
        else:
            Execution.objects.filter(pk=execution.pk).delete()
    raise refusal


def _in_flight(execution: Execution) -> int:
    return Execution.objects.filter(
        agent=execution.agent, status__in=[Status.QUEUED, Status.RUNNING]
    ).count()


def execution_run(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    session_id: str = "",
) -> Execution:
    """Run one turn synchronously and return the finished Execution.

    Never raises for a turn that failed: the Execution carries status and error_code.
    Raises TooManyTurns, with no row left, when the agent is at its turns cap.
    """
    execution = execution_create(
        agent=agent,
        message=message,
        trigger=trigger,
        model=model,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
    )
    execution_admit(execution=execution, record_refusal=False)
    return execution_dispatch(execution=execution, agent=agent)


def execution_claim(*, execution_id: str, now: datetime) -> Execution | None:
    """Claim a queued turn for dispatch (async): None when it is not queued any more.

    A redelivered task for a turn that already started or finished claims nothing, so
    no turn is ever dispatched twice.
    """
    claimed = Execution.objects.filter(pk=execution_id, status=Status.QUEUED).update(
        status=Status.RUNNING, dispatched_at=now
    )
    if claimed != 1:
        return None
    return Execution.objects.select_related("agent__subscription").get(pk=execution_id)


def execution_dispatch(*, execution: Execution, agent: Agent) -> Execution:
    """The dispatch loop (``execution/turn.py``). Every path finishes the row; never
    raises for a failed turn."""
    return turn_dispatch(execution=execution, agent=agent)


def execution_enqueue(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    schedule: Schedule | None = None,
) -> Execution:
    """Create a queued turn and hand it to a worker once the row is committed.

    Admission (``execution_admit``) runs once the row is committed, before the hand
    over. A refused turn with a caller raises TooManyTurns (no row left); one a
    schedule fired has no caller to answer, so it is recorded as a failed turn
    (``too_many_turns``) of its schedule instead of being lost.
    """
    with transaction.atomic():
        execution = execution_create(
            agent=agent,
            message=message,
            trigger=trigger,
            model=model,
            timeout_seconds=timeout_seconds,
            queued=True,
            schedule=schedule,
        )
        transaction.on_commit(lambda: _queued_turn_hand_over(execution))
    return execution


def _queued_turn_hand_over(execution: Execution) -> None:
    try:
        execution_admit(execution=execution, record_refusal=execution.schedule_id is not None)
    except TooManyTurns as exc:
        if execution.schedule_id is None:
            raise
        logger.warning("turn %s of a schedule refused: %s", execution.pk, exc.message)
        return
    handover.turn_hand_over(str(execution.pk))


def execution_run_queued(*, execution_id: str) -> str:
    """Run a queued turn (the worker's side); idempotent by execution id.

    Returns what happened: ``ran``, or ``not_queued`` for a redelivered task whose
    turn already started or finished (it is never dispatched twice).
    """
    with log_context(execution_id=execution_id):
        execution = execution_claim(execution_id=execution_id, now=clock.now())
        if execution is None:
            return "not_queued"
        if execution.agent is None:
            finish_failed(execution, error_code="container_fault", detail="the agent was deleted")
            metrics.turns_failed_outside_the_loop(error_code="container_fault")
            return "ran"
        execution_dispatch(execution=execution, agent=execution.agent)
        return "ran"


def execution_run_parked(*, execution_id: str, now: datetime) -> str:
    """Run a parked turn whose instant has come (the worker's side); idempotent.

    Returns ``ran``, or ``not_due`` when it is not (or no longer) a parked turn due at
    ``now``: a duplicate or early delivery dispatches nothing.
    """
    with log_context(execution_id=execution_id):
        execution = parking.execution_unpark(execution_id=execution_id, now=now)
        if execution is None:
            return "not_due"
        if execution.agent is None:
            execution.status = Status.FAILED
            execution.error_code = "container_fault"
            execution.error_detail = "the agent was deleted"
            execution.finished_at = now
            execution.save()
            metrics.turns_failed_outside_the_loop(error_code="container_fault")
            return "ran"
        execution_dispatch(execution=execution, agent=execution.agent)
        return "ran"


def executions_reap(*, now: datetime) -> int:
    """Fail turns left ``running`` or ``queued`` past their deadline (``worker_lost``).

    A turn whose outcome is unknown is failed, never re-run blind: it may have been
    served and billed. Returns how many rows were failed.
    """
    lost = Execution.objects.filter(status__in=[Status.RUNNING, Status.QUEUED], deadline__lt=now)
    # Their key reservations are settled once, after the rows are failed (a worker that
    # is still finishing one settles it first, and this then settles nothing).
    reserved = list(lost.filter(key_reservation__settled=False).values_list("pk", flat=True))
    reaped = lost.update(
        status=Status.FAILED,
        error_code="worker_lost",
        error_detail="the process running this turn was lost before it finished",
        finished_at=now,
    )
    key_reservation.turns_key_release_lost(execution_ids=reserved)
    metrics.turns_failed_outside_the_loop(error_code="worker_lost", count=reaped)
    return reaped
