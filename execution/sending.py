"""Applying the planner's ``Send``: the legacy re-assignment, the lease, the key
reservation, the request to the agent server; what happened goes back to the
evidence as one event. And ``Record``: a refusal recorded against what it ran on."""

from __future__ import annotations

import logging
from dataclasses import replace

from agents import lifecycle
from agents.client import AgentServerNotConnected, AgentServerUnavailable, TurnOutcome
from execution.deadlines import budget_end
from execution.live.cancel import TurnCancelled, cancel_requested
from execution.live.turn_events import attempt_answered, attempt_sent
from execution.protection import key_reserve, key_settle, lease_take
from execution.turn_state import TurnState
from routing.planner import Attempt, BudgetRefused, Busy, Outcome, Record, Send, Unreachable
from routing.rung import Rung, RungKind
from routing.walk import Why
from subscriptions.evidence_reads import attempt_refusal_record
from subscriptions.plan_wire import plan_wire_rung
from subscriptions.services import assignment_commit
from trinity import clock, metrics
from trinity_contract.log_json import log_context_update

logger = logging.getLogger(__name__)


def send(state: TurnState, action: Send) -> None:
    """Send the turn on ``action.rung``, or say why nothing was sent (a full cap, a
    closed key budget, an unreachable agent server)."""
    _unless_cancelled(state)
    if action.routed:
        state.routed = action.routed
        name = action.rung.name if action.rung is not None else "its own credential"
        logger.info("turn %s: first attempt routed to %s (%s)", state.holder, name, action.why)
    rung = state.rung(action.rung)
    if action.reassign:
        assert rung is not None  # noqa: S101 - the planner reassigns plans only
        _legacy_apply(state, rung)
    if not lease_take(state, rung):
        assert action.rung is not None  # noqa: S101 - only a plan's lease can be refused
        metrics.routed_at_capacity()
        logger.info("turn %s: %s is serving its concurrency cap", state.holder, action.rung.name)
        state.evidence = state.evidence.after(Busy(action.rung, action.why, retry=action.retry))
        return
    log_context_update(
        subscription=rung.name if rung is not None and rung.kind is RungKind.SUBSCRIPTION else ""
    )
    if rung is not None and rung.kind is RungKind.API_KEY:
        closed = key_reserve(state)
        if closed is not None:
            state.evidence = state.evidence.after(BudgetRefused(closed, retry=action.retry))
            return
    if rung is not None:
        # As it goes on the wire (a signed-in plan's current access token, refreshed
        # when due): what ran, so the trail's fingerprint is the token that was sent.
        rung = plan_wire_rung(rung, now=clock.now())
    why = Why.RETRY if action.retry else action.why
    attempt_sent(state.events, rung, why.value, walked=state.events.attempt > 0)
    outcome = _request(state, rung)
    if outcome is None:
        return
    ran_on = _ran_on(state, rung, outcome)
    _note_attempt(state, ran_on, why, outcome)
    attempt_answered(state.events, ran_on, outcome)
    if not outcome.ok and (outcome.error_code == "cancelled" or cancel_requested(state.holder)):
        state.last_outcome = outcome
        raise TurnCancelled(outcome.detail)
    attempt = Attempt(
        sent=action.rung,
        ran_on=state.keep(ran_on) if ran_on is not None else None,
        why=action.why,
        outcome=Outcome(
            outcome.ok,
            outcome.error_code,
            outcome.detail,
            outcome.resets_at,
            outcome.limiting_window,
        ),
        retry=action.retry,
    )
    state.last_outcome = outcome
    state.evidence = state.evidence.after(attempt)


def _unless_cancelled(state: TurnState) -> None:
    """Nothing more is sent for a turn its owner or an admin cancelled (one cache
    GET): a release of what it holds, and its row, follow in ``turn_dispatch``."""
    if cancel_requested(state.holder):
        raise TurnCancelled("cancelled before the attempt was sent")


def _request(state: TurnState, rung: Rung | None) -> TurnOutcome | None:
    """One request with the turn's remaining budget; None (an ``Unreachable`` event)
    when the agent server could not be reached. A server that took no connection and
    is gone (it crashed or was killed since the last turn) is started again and the
    request, which never left, is sent once more."""
    try:
        try:
            outcome = _run_turn(state, rung)
        except AgentServerNotConnected:
            revived = lifecycle.agent_revive(agent=state.agent)
            if revived is None:
                raise
            state.agent = revived
            outcome = _run_turn(state, rung)
    except AgentServerUnavailable as exc:
        key_settle(state, None)
        state.evidence = state.evidence.after(Unreachable(str(exc)))
        return None
    key_settle(state, outcome)
    return outcome


def _run_turn(state: TurnState, rung: Rung | None) -> TurnOutcome:
    remaining = (budget_end(state.execution) - clock.now()).total_seconds()
    execution, agent = state.execution, state.agent
    # The key's remaining budget travels with it: the forwarder refuses past it.
    reservation = state.key_reservation if state.key_reserved else None
    with state.agent_server_wait():
        return lifecycle.client_for(agent).run_turn(
            execution_id=state.holder,
            message=execution.message,
            timeout_seconds=remaining,
            model=execution.model or agent.model or None,
            # A legacy server is sent nothing: it runs on what it was assigned.
            rung=None if state.evidence.legacy.on else rung,
            session_id=execution.session_id or None,
            budget_usd=reservation.remaining_usd if reservation is not None else None,
            budget_name=reservation.remaining_of if reservation is not None else None,
            on_event=state.events.cli,
        )


def _ran_on(state: TurnState, rung: Rung | None, outcome: TurnOutcome) -> Rung | None:
    """What the attempt ran on: the rung, when the agent server echoed it; else the
    server predates the override and ran on its assignment (legacy from now on)."""
    if rung is None or rung.echoed_by(outcome.override_echo):
        return rung
    if not state.evidence.legacy.on:
        logger.warning(
            "agent %s does not echo the auth override: applying rungs by assignment",
            state.agent.name,
        )
    agent = state.reload_agent()
    _legacy_update(state, on=True)
    return lifecycle.baseline_rung(agent)


def _legacy_update(state: TurnState, *, on: bool, restarted: bool = False) -> None:
    """The legacy facts after the agent was (re)loaded."""
    evidence = state.evidence
    legacy = evidence.legacy
    legacy = replace(
        legacy,
        on=on,
        restarts=legacy.restarts + (1 if restarted else 0),
        assignment=state.agent.subscription_id,
    )
    agent = evidence.agent
    if agent is not None:
        agent = replace(agent, on_api_key=state.agent.on_api_key_since is not None)
    state.evidence = replace(evidence, legacy=legacy, agent=agent)


def _legacy_apply(state: TurnState, rung: Rung) -> None:
    """Apply ``rung`` the old way: commit it as the assignment, then hot-reload (at most
    one rung may need a restart: a recreate kills the agent's other turns)."""
    agent = state.agent
    current = agent.subscription_id
    assert current is not None and rung.subscription_id is not None  # noqa: S101 - planned so
    state.legacy_committed = assignment_commit(
        agent=agent,
        expected_subscription_id=current,
        expected_subscription_name=agent.subscription.name if agent.subscription else None,
        subscription_id=rung.subscription_id,
        subscription_name=rung.name,
        why={"why": "legacy", "refused": "its subscription refused the turn"},
        now=clock.now(),
    )
    with state.agent_server_wait():
        reloaded = lifecycle.hot_reload_subscription_token(agent=state.reload_agent())
    state.reload_agent()
    _legacy_update(state, on=True, restarted=reloaded != "reloaded")


def _note_attempt(state: TurnState, ran_on: Rung | None, why: Why, outcome: TurnOutcome) -> None:
    state.attempts.append(
        {
            "credential_kind": ran_on.kind.value if ran_on else "none",
            "subscription_id": ran_on.subscription_id if ran_on else None,
            "name": ran_on.name if ran_on else "",
            "fingerprint": ran_on.secret.fingerprint if ran_on else "",
            "why": why.value,
            "outcome": "served"
            if outcome.ok
            else ("cancelled" if outcome.error_code == "cancelled" else "refused"),
            "error_code": outcome.error_code,
            "status_code": outcome.status_code,
            "override_echo": outcome.override_echo,
            "legacy": state.evidence.legacy.on,
            "resets_at": outcome.resets_at.isoformat() if outcome.resets_at else None,
            "at": clock.now().isoformat(),
        }
    )


def record(state: TurnState, action: Record) -> None:
    """Record the last attempt's refusal against the credential it ran on, as it
    happens: concurrent turns see it, and an operator with auto-switch off still does."""
    ran_on = state.evidence.attempts[-1].ran_on
    state.evidence = attempt_refusal_record(
        state.evidence,
        action.refusal,
        agent_name=state.agent.name,
        agent_id=state.agent.pk,
        sent=state.rung(ran_on),  # the secret it ran on: a key refusal names that key
        now=clock.now(),
    )
