"""A turn's side of the key budgets: reserve before a key rung is sent, settle once after.

The ledger and its rules are ``subscriptions/key_spend.py``; this module ties them to the
Execution, whose ``key_reservation`` records what was reserved
(``{"usd", "ledgers", "settled"}``) so whoever finishes the turn (the dispatch loop, or
the reaper for a lost worker) releases exactly that, once: the settle is a conditional
update on ``settled`` and commits together with the ledger rows.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from execution.models import Execution, Status
from routing.rung import RungKind
from subscriptions.key_spend import (
    ZERO,
    BudgetClosed,
    Reservation,
    key_budget_notify,
    key_spend_reserve,
    key_spend_settle,
)
from trinity.models import SystemSettings

logger = logging.getLogger(__name__)

# The estimate is the mean of this many of the agent's latest key-served turns.
ESTIMATE_SAMPLE = 20


def key_turn_estimate(*, agent: Agent) -> Decimal:
    """What a key turn of ``agent`` reserves: the mean real cost of its latest key-served
    turns, else ``TRINITY_KEY_TURN_ESTIMATE_USD`` (also when that mean is zero, which
    would admit any number of concurrent turns)."""
    costs = list(
        Execution.objects.filter(
            agent=agent,
            served_by_kind=RungKind.API_KEY,
            status=Status.SUCCEEDED,
            cost_usd__isnull=False,
        )
        .order_by("-created_at")
        .values_list("cost_usd", flat=True)[:ESTIMATE_SAMPLE]
    )
    known = [Decimal(c) for c in costs if c is not None]
    mean = sum(known, ZERO) / len(known) if known else ZERO
    if mean <= ZERO:
        return Decimal(settings.TRINITY_KEY_TURN_ESTIMATE_USD)
    return mean.quantize(Decimal("0.000001"))


@transaction.atomic
def turn_key_reserve(
    *, execution: Execution, agent: Agent, system: SystemSettings, now: datetime
) -> Reservation | BudgetClosed:
    """Admit the turn's key rung against every budget that applies, and record the
    reservation on the execution in the same transaction; or the budget that is closed
    (the operator is told once per budget per period, after commit).
    """
    usd = key_turn_estimate(agent=agent)
    admitted = key_spend_reserve(agent=agent, system=system, usd=usd, now=now)
    if isinstance(admitted, BudgetClosed):
        closed = admitted
        transaction.on_commit(lambda: key_budget_notify(closed=closed, agent=agent, now=now))
        return closed
    execution.key_reservation = {**admitted.as_json(), "settled": False}
    Execution.objects.filter(pk=execution.pk).update(key_reservation=execution.key_reservation)
    return admitted


def settled_cost(*, served: bool, cost_usd: Decimal | None, unbilled: bool) -> Decimal | None:
    """What a key attempt spent: its real cost when served (None: not reported),
    nothing when the provider did not bill it (``unbilled``: a refusal for quota, credit
    or the credential, or a 5xx); None when its outcome is unknown (a timeout, a kill,
    a lost worker: it may have been billed)."""
    if served:
        return cost_usd
    if unbilled:
        return ZERO
    return None


@transaction.atomic
def turn_key_settle(*, execution_id: UUID | str, spent: Decimal | None) -> dict[str, Any] | None:
    """Settle the execution's open key reservation once: reserved -= estimate, spent +=
    ``spent`` (the estimate when None: an unknown cost is charged as expected, not as
    free). Returns the settled reservation as now stored, or None when this call
    settled nothing (none open, or another finisher settled it first)."""
    row = (
        Execution.objects.filter(pk=execution_id, key_reservation__settled=False)
        .values_list("key_reservation", flat=True)
        .first()
    )
    if row is None:
        return None
    reservation = dict(row)
    reserved = Decimal(str(reservation["usd"]))
    charged = reserved if spent is None else spent
    settled = {**reservation, "settled": True, "spent": str(charged)}
    # The claim: of two finishers (the loop and the reaper), one updates the row.
    claimed = Execution.objects.filter(
        pk=execution_id, key_reservation__settled=False, key_reservation=row
    ).update(key_reservation=settled)
    if claimed != 1:
        return None
    key_spend_settle(
        ledger_ids=[int(i) for i in reservation.get("ledgers", [])],
        reserved=reserved,
        spent=charged,
    )
    return settled


def turns_key_release_lost(*, execution_ids: list[UUID]) -> int:
    """Settle the reservations of turns the reaper failed (their worker is gone, so
    their cost is unknown: charged at the estimate). Returns how many it settled."""
    return sum(turn_key_settle(execution_id=pk, spent=None) is not None for pk in execution_ids)
