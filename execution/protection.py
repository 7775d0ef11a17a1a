"""What a turn holds and must give back: a concurrency lease on the plan it is sent
on, its provider's half-open breaker trial, and a key-budget reservation."""

from __future__ import annotations

from decimal import Decimal

from agents.client import TurnOutcome
from agents.models import Agent
from execution import key_reservation
from execution.turn_state import TurnState
from routing.attempt_refusal import classify_attempt_refusal
from routing.rung import Rung, RungKind
from subscriptions import breaker, leases
from subscriptions.key_spend import BudgetClosed
from trinity import clock


def _cap_of(state: TurnState, subscription_id: int) -> int | None:
    """The subscription's concurrency cap: the assignment's from the row loaded with the
    agent (no query on the served path), the others' from one query per turn."""
    agent = state.agent
    assigned = agent.subscription if Agent.subscription.is_cached(agent) else None
    if assigned is not None and assigned.pk == subscription_id:
        return assigned.max_concurrency
    if state.caps is None:
        state.caps = leases.subscription_caps(agent.provider)
    return state.caps.get(subscription_id)


def lease_take(state: TurnState, rung: Rung | None) -> bool:
    """Hold a lease on ``rung``'s subscription (if capped) until the turn's deadline;
    False when it serves its cap. Moving to another rung gives the old lease back; an
    unreachable store enforces no cap."""
    if rung is None or rung.kind is not RungKind.SUBSCRIPTION or rung.subscription_id is None:
        lease_give(state)
        return True
    if rung.subscription_id == state.lease_on:
        return True  # a retry on the same plan keeps its slot
    lease_give(state)
    cap = _cap_of(state, rung.subscription_id)
    if cap is None:
        return True
    assert state.execution.deadline is not None  # noqa: S101 - every created turn has one
    taken = leases.lease_acquire(
        subscription_id=rung.subscription_id,
        holder=state.holder,
        cap=cap,
        expires_at=state.execution.deadline,
        now=clock.now(),
    )
    if taken is False:
        return False
    if taken:
        state.lease_on = rung.subscription_id
    return True


def lease_give(state: TurnState) -> None:
    if state.lease_on is not None:
        leases.lease_release(subscription_id=state.lease_on, holder=state.holder)
        state.lease_on = None


def protection_release(state: TurnState, *, served: bool) -> None:
    """Give back the turn's lease and settle its breaker trial; never raises."""
    lease_give(state)
    if state.breaker_trial:
        state.breaker_trial = False
        verdict = breaker.trial_verdict(
            [a["error_code"] or "" for a in state.attempts], served=served
        )
        breaker.breaker_trial_end(
            provider=state.agent.provider, provider_failed=verdict, holder=state.holder
        )


def key_reserve(state: TurnState) -> BudgetClosed | None:
    """Admit the key rung against its budgets before it is sent: None when admitted,
    else the closed budget (the operator is told once, by the reservation)."""
    admitted = key_reservation.turn_key_reserve(
        execution=state.execution, agent=state.agent, system=state.settings(), now=clock.now()
    )
    if isinstance(admitted, BudgetClosed):
        return admitted
    state.key_reserved = True
    state.key_reservation = admitted
    return None


def key_settle(state: TurnState, outcome: TurnOutcome | None) -> None:
    """Settle the open key reservation with what the attempt spent: the forwarder's
    metered sum when the agent server reports one, served or refused (a turn that
    failed after some requests were served still spent them); else as before metering
    (``outcome`` None: unknown, charged at the estimate). No reservation, no query."""
    if not state.key_reserved:
        return
    state.key_reserved = False
    state.key_reservation = None
    spent = None
    if outcome is not None and outcome.metered is not None:
        spent = outcome.metered.cost
    elif outcome is not None:
        refusal = classify_attempt_refusal(error_code=outcome.error_code, detail=outcome.detail)
        spent = key_reservation.settled_cost(
            served=outcome.ok,
            cost_usd=Decimal(str(outcome.cost_usd)) if outcome.cost_usd is not None else None,
            unbilled=refusal.walks or refusal.error_code == "upstream_error",
        )
    settled = key_reservation.turn_key_settle(execution_id=state.execution.pk, spent=spent)
    if settled is not None:
        # The row's later full save must not write the open reservation back.
        state.execution.key_reservation = settled
