"""Celery adapters for turns: take an id, call one service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from execution import handover, parking, services
from execution.live.retention import BATCH, turn_events_prune
from execution.schedules.services import schedules_fire
from trinity import clock
from trinity.retention import drain

# A worker runs the whole turn, walk included: its hard limit is the longest turn
# plus the client's margin and slack, so only a stuck worker is ever killed by it.
_TURN_LIMIT = settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS + int(
    services.DEADLINE_SLACK.total_seconds()
)


@shared_task(
    name=handover.RUN_TURN,
    acks_late=True,
    # A worker lost mid-turn gets its task redelivered; the claim makes the redelivery
    # a no-op for a turn that had started (the reaper fails it worker_lost).
    reject_on_worker_lost=True,
    soft_time_limit=_TURN_LIMIT,
    time_limit=_TURN_LIMIT + 30,
)
def run_turn(execution_id: str) -> str:
    return services.execution_run_queued(execution_id=execution_id)


@shared_task(name="execution.reap_lost_turns", soft_time_limit=50, time_limit=60)
def reap_lost_turns() -> int:
    """Fail turns left running or queued past their deadline (worker_lost)."""
    return services.executions_reap(now=clock.now())


@shared_task(
    name=handover.RUN_PARKED_TURN,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=_TURN_LIMIT,
    time_limit=_TURN_LIMIT + 30,
)
def run_parked_turn(execution_id: str) -> str:
    """Re-dispatch a parked turn at its instant; a duplicate or early delivery is a no-op."""
    return services.execution_run_parked(execution_id=execution_id, now=clock.now())


@shared_task(name="execution.resend_parked_turns", soft_time_limit=50, time_limit=60)
def resend_parked_turns() -> int:
    """Re-send parked turns whose instant passed without their eta message arriving."""
    return parking.executions_parked_resend(now=clock.now())


@shared_task(name="execution.fire_schedules", soft_time_limit=50, time_limit=60)
def fire_schedules() -> int:
    """Fire the due agent schedules as queued ``schedule`` turns."""
    return schedules_fire(now=clock.now())


@shared_task(name="execution.prune_turn_events", soft_time_limit=240, time_limit=300)
def prune_turn_events() -> int:
    """Drop finished turns' events past TRINITY_TURN_EVENTS_RETENTION_DAYS, batch by
    batch for up to three minutes."""
    now = clock.now()
    return drain(lambda: turn_events_prune(now=now), batch=BATCH, budget_seconds=180)
