"""Parked turns: an autonomous turn every credential refused waits for the earliest reset.

Parking writes the row (``parked``, ``parked_until``) and, on commit, hands Celery a
re-dispatch at that instant (``eta``: the broker keeps it across a worker restart).
A beat sweep re-sends parked turns whose instant passed, for a message the broker
lost. Whatever delivers it, the turn runs once: the claim is a compare-and-set from
``parked`` to ``running``, so a duplicate delivery claims nothing.

The reaper leaves parked rows alone (it reaps ``running`` and ``queued``); the claim
renews the deadline, so the re-run gets its whole budget again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction

from agents.models import Agent, WaitPolicy
from execution import handover
from execution.models import Execution, Status
from routing.planner.park import park_until
from trinity.notifications import notification_send
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

# The eta message had this long to arrive before the sweep re-sends the turn (the
# claim makes a late duplicate harmless; the grace only spares the common case one).
RESEND_GRACE = timedelta(seconds=60)
RESEND_BATCH = 500
DETAIL_MAX = 2000


def parks_until(
    *, execution: Execution, agent: Agent, resets_at: datetime | None, now: datetime
) -> datetime | None:
    """The instant ``execution`` would park until under ``agent``'s wait policy, or None."""
    return park_until(
        autonomous=execution.autonomous,
        waits=agent.wait_policy == WaitPolicy.WAIT,
        max_wait_seconds=agent.max_wait_seconds,
        resets_at=resets_at,
        created_at=execution.created_at,
        now=now,
    )


@transaction.atomic
def execution_park(
    *, execution: Execution, agent: Agent, until: datetime, detail: str, now: datetime
) -> Execution:
    """Park the (refused, autonomous) turn until ``until``; returns the parked row.

    ``detail`` (the walk's trail) is kept in ``error_detail`` so the operator sees why
    it waits. The re-dispatch is enqueued with ``eta=until`` once the row is committed;
    the operator is told once per agent and reset instant.
    """
    execution.status = Status.PARKED
    execution.parked_until = until
    execution.resets_at = until
    execution.error_code = ""
    execution.error_detail = redact(detail)[:DETAIL_MAX]
    execution.finished_at = None
    execution.save()
    execution_id = str(execution.pk)
    transaction.on_commit(lambda: handover.parked_turn_hand_over(execution_id, eta=until))
    notification_send(
        kind="turn_parked",
        level="warning",
        title=f"A turn is parked until {until:%Y-%m-%d %H:%M} UTC",
        body=f"Agent {agent.name!r}: every credential refused an autonomous turn; it runs "
        f"again at {until.isoformat()}, the earliest known reset. {detail}",
        agent_name=agent.name,
        agent_id=agent.pk,
        # Once per agent and instant: a schedule's turns parked on one reset say it once.
        dedup_key=f"turn-parked:{agent.pk}:{until.isoformat()}",
        dedup_ttl=max(60, int((until - now).total_seconds()) + 60),
        data={"execution_id": execution_id, "parked_until": until.isoformat()},
        now=now,
    )
    logger.info("turn %s on %s: parked until %s", execution.pk, agent.name, until.isoformat())
    return execution


def execution_unpark(*, execution_id: str, now: datetime) -> Execution | None:
    """Claim a parked turn whose instant has come (``parked`` -> ``running``).

    Returns the claimed row, or None: not parked any more (a duplicate delivery, or it
    already ran) or not due yet (an early delivery; the sweep sends it again). The
    deadline is renewed: the re-run gets the turn's whole budget from ``now``.
    """
    row = (
        Execution.objects.filter(pk=execution_id, status=Status.PARKED)
        .values("created_at", "deadline", "parked_until")
        .first()
    )
    if row is None or row["parked_until"] is None or row["parked_until"] > now:
        return None
    budget = row["deadline"] - row["created_at"] if row["deadline"] else timedelta(0)
    claimed = Execution.objects.filter(
        pk=execution_id, status=Status.PARKED, parked_until=row["parked_until"]
    ).update(
        status=Status.RUNNING,
        dispatched_at=now,
        deadline=now + budget,
        error_detail="",
        walk_stop="",
        resets_at=None,
    )
    if claimed != 1:
        return None
    return Execution.objects.select_related("agent__subscription").get(pk=execution_id)


def executions_parked_resend(*, now: datetime) -> int:
    """Re-send the re-dispatch of parked turns whose instant passed (a lost message).

    Returns how many were sent; the claim makes one that also arrives by its eta harmless.
    """
    due = list(
        Execution.objects.filter(status=Status.PARKED, parked_until__lte=now - RESEND_GRACE)
        .order_by("parked_until")
        .values_list("pk", flat=True)[:RESEND_BATCH]
    )
    for execution_id in due:
        handover.parked_turn_hand_over(str(execution_id))
    return len(due)
