"""The executor's answers to the planner's ``Need``: each gathers one piece of evidence
(a cache read, a query, the agent's start) and adds it to the turn's evidence.

The served path asks three: the breaker (one cache GET), readiness (in memory when the
agent is up) and the assignment's verdict (its row in memory, one cache round trip).
Ranking, the key rung's state and the secrets are read only when the planner routes or
walks. Whether a plan may serve is never decided here: the gatherers read facts and
``routing.eligibility`` (``Admission``, ``admit``) judges them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import DatabaseError

from agents import lifecycle
from agents.models import Agent, AuthMode, ProcessState
from execution import affinity
from execution.turn_state import TurnState
from routing.eligibility import Admission, Admitted, Role, forbidden
from routing.headroom.placement import settled
from routing.planner import (
    AgentFacts,
    Ask,
    Current,
    Evidence,
    KeyState,
    Legacy,
    Need,
    Previous,
    SettingsFacts,
)
from routing.providers import key_label
from subscriptions import breaker, leases
from subscriptions.evidence_reads import (
    breaker_failure_observe,
    forecast_read,
    readings_read,
    rungs_read,
)
from subscriptions.key_rung_state import key_rung_state
from subscriptions.placement_look import placement_due, placement_target
from subscriptions.plan_facts import (
    candidate_of_plan,
    plan_facts_read,
    selection_read,
    session_plan_read,
)
from subscriptions.policy_refusals import assignment_policy_refusal, switching_stop
from subscriptions.rung_secrets import key_rung
from subscriptions.selectors import subscription_count
from subscriptions.week_planning import planned_read
from trinity import clock

logger = logging.getLogger(__name__)


def evidence_read(state: TurnState, need: Need, now: datetime) -> None:
    """The read-only twin of ``evidence_gather`` (the routing explainer): the same
    gatherers, except the three that act (the breaker's trial claim, the agent's start,
    counting a failure against the breaker), which read instead. No write, no claim,
    no lease, no probe; a failed read fails the explanation."""
    state.evidence = _READ.get(need.ask, _GATHER[need.ask])(state, need, now)


def evidence_gather(state: TurnState, need: Need) -> None:
    """Gather what ``need`` asks into ``state.evidence``. A database error in an optional
    stage (``need.stage``) skips that stage: an optimisation must not fail a turn."""
    gather = _GATHER[need.ask]
    if not need.stage:
        state.evidence = gather(state, need, clock.now())
        return
    try:
        state.evidence = gather(state, need, clock.now())
    except DatabaseError:
        logger.warning("turn %s: %s check failed", state.execution.pk, need.stage, exc_info=True)
        evidence = state.evidence
        state.evidence = replace(evidence, skipped=evidence.skipped | {need.stage})


def _breaker(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Whether the provider's breaker lets the turn be sent (closed, degraded, or
    half-open with this turn as its one trial). One cache round trip."""
    assert state.execution.deadline is not None  # noqa: S101 - every created turn has one
    trial_seconds = int((state.execution.deadline - now).total_seconds()) + 1
    admitted, state.breaker_trial = breaker.breaker_turn_gate(
        provider=state.agent.provider, now=now, trial_seconds=trial_seconds, holder=state.holder
    )
    return replace(state.evidence, admitted=admitted)


def _ready(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Start the agent's server if it is not up, take a forbidden boot key away from it;
    then the agent's facts. Either failing is the evidence's ``ready`` text."""
    unready = _unready(state)
    if unready:
        return replace(state.evidence, ready=unready)
    return _agent_facts(state, need, now)


def _agent_facts(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The agent's facts as its row says them (no start: the explainer's ``READY``)."""
    agent = state.agent
    baseline = lifecycle.baseline_rung(agent)
    moved_at, moved_from = agent.last_move()
    facts = AgentFacts(
        name=agent.name,
        origin=agent.subscription_id,
        baseline=state.keep(baseline) if baseline is not None else None,
        routing_policy=agent.routing_policy,
        policy_refusal=assignment_policy_refusal(agent),
        on_api_key=agent.on_api_key_since is not None,
        moved_at=moved_at,
        moved_from=None if settled(moved_at, now=now) else moved_from,
    )
    legacy = Legacy(assignment=agent.subscription_id)
    subscription = agent.subscription if agent.subscription_id is not None else None
    assigned = None
    if subscription is not None:
        # A rule that forbids the assignment is known from its row (no cache read).
        turn = state.evidence.turn
        assigned = forbidden(candidate_of_plan(subscription, None), facts, turn, now=now)
    return replace(state.evidence, ready="", agent=facts, legacy=legacy, assigned=assigned)


def _unready(state: TurnState) -> str:
    agent = state.agent
    if agent.process_state != ProcessState.RUNNING or not agent.endpoint:
        try:
            with state.agent_server_wait():
                agent = state.agent = lifecycle.agent_start(agent=agent)
        except lifecycle.AgentStartFailed as exc:
            return f"the agent could not start: {exc}"
        if not agent.endpoint:
            detail = agent.process_detail or "its server did not come up in time"
            return f"the agent could not start: {detail}"
    if agent.auth_mode == AuthMode.API_KEY and lifecycle.baseline_rung(agent) is None:
        # Booted on the key, which the verdict no longer allows (the admin turned the
        # fallback off): a turn sent without an override would run on that boot key.
        # Rare (the switch re-applies credentials); the row is in memory: no query.
        lifecycle.agent_apply_credentials(agent=agent)
        if state.reload_agent().auth_mode == AuthMode.API_KEY:
            return "the agent still holds the platform key"
    return ""


def _settings(state: TurnState, need: Need, now: datetime) -> Evidence:
    system = state.settings()
    # The key of this agent's provider only: a Claude agent never holds the OpenAI key.
    key = key_rung(system, provider=state.agent.provider)
    if key is not None:
        state.keep(key)
    facts = SettingsFacts(
        auto_switch=system.auto_switch_subscriptions,
        key_configured=key is not None,
        switching_stop=switching_stop(agent=state.agent, system=system),
        key_name=key_label(state.agent.provider),
    )
    return replace(state.evidence, settings=facts)


def _admission(state: TurnState, now: datetime, **out: Any) -> Admission:
    """What ``admit`` reads of this turn and its agent at ``now``."""
    agent = state.evidence.agent
    assert agent is not None  # noqa: S101 - asked only once the agent is ready
    return Admission.of(agent, state.evidence.turn, now=now, **out)


def _assigned(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The assignment's verdict (``admit``): its row (in memory with the agent) and its
    snapshot, refusal mark and forecast (one cache round trip)."""
    subscription = state.agent.subscription
    assert subscription is not None  # noqa: S101 - the planner asks only with an assignment
    facts = plan_facts_read(subscription)
    verdict = _admission(state, now).judge(facts, Role.ASSIGNED)
    return replace(state.evidence, assigned=verdict)


def _affinity(state: TurnState, need: Need, now: datetime) -> Evidence:
    """What served the session's previous turn (one indexed query)."""
    found = affinity.session_previous_credential(
        agent=state.agent,
        session_id=state.execution.session_id,
        before=state.execution.created_at,
    )
    previous = Previous(*found) if found is not None else None
    return replace(state.evidence, previous=previous)


def _affinity_plan(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The session's plan as a rung while ``admit`` lets the turn stay on it (one query,
    one cache round trip)."""
    facts, rung = session_plan_read(need.ids[0], provider=state.agent.provider)
    verdict = _admission(state, now).judge(facts, Role.SESSION)
    kept = state.keep(rung) if rung is not None and isinstance(verdict, Admitted) else None
    if kept is not None:
        logger.info("turn %s: session stays on %s", state.execution.pk, kept.name)
    return replace(state.evidence, affinity_plan=kept)


def _pool_size(state: TurnState, need: Need, now: datetime) -> Evidence:
    return replace(state.evidence, pool_size=subscription_count(state.agent.provider))


def at_capacity_ids(state: TurnState, now: datetime) -> set[int]:
    """The capped subscriptions serving their cap, bar the one this turn holds."""
    if state.caps is None:
        state.caps = leases.subscription_caps(state.agent.provider)
    caps = {pk: cap for pk, cap in state.caps.items() if pk != state.lease_on}
    return leases.subscriptions_at_capacity(caps, now=now)


def _selection(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Every plan of the provider judged for this turn (``ids``: tried already; the
    plans serving their cap are read here) and the admitted ones ranked."""
    admission = _admission(
        state, now, tried=frozenset(need.ids), at_capacity=at_capacity_ids(state, now)
    )
    strategy = state.settings().routing_strategy  # already read: no second query
    return state.evidence.learn(selection=selection_read(admission, strategy=strategy))


def _key(state: TurnState, need: Need, now: datetime) -> Evidence:
    found = key_rung_state(agent=state.agent, system=state.settings(), now=now)
    return state.evidence.learn(key=KeyState(found.available, found.budget))


def _current(state: TurnState, need: Need, now: datetime) -> Evidence:
    current_id, current_name = (
        Agent.objects.filter(pk=state.agent.pk)
        .values_list("subscription_id", "subscription__name")
        .get()
    )
    return state.evidence.learn(current=Current(current_id, current_name or ""))


def _rungs(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The wanted secrets and the next few in rank order, in one query: decrypting
    every ranked candidate's token (hundreds) for the one or two a walk tries was most
    of a walked turn's CPU."""
    return rungs_read(state.evidence, need, state.keep)


def _forecast(state: TurnState, need: Need, now: datetime) -> Evidence:
    return forecast_read(state.evidence, need, _admission(state, now))


def _placement(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Where placement would move the agent (one cache read of the snapshots)."""
    origin = state.agent.subscription_id
    assert origin is not None  # noqa: S101 - placement is asked only with an assignment
    target = placement_target(origin, need.ids, now=now, family=state.evidence.turn.family)
    return state.evidence.learn(placement=target)


def _placement_due(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Claim the agent's placement look (one cache add)."""
    return state.evidence.learn(placement_due=placement_due(state.agent.pk))


def _placement_due_read(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The explainer claims nothing: it shows what a due look would do."""
    return state.evidence.learn(placement_due=True)


def _planned(state: TurnState, need: Need, now: datetime) -> Evidence:
    """The agent's entry in the week plan (one cache read)."""
    return replace(state.evidence, planned=planned_read(state.agent.pk))


def _readings(state: TurnState, need: Need, now: datetime) -> Evidence:
    return readings_read(state.evidence, need)


def _breaker_failure(state: TurnState, need: Need, now: datetime) -> Evidence:
    return breaker_failure_observe(state.evidence, state.agent.provider, now)


def _breaker_open(state: TurnState, need: Need, now: datetime) -> Evidence:
    is_open = breaker.breaker_open_now(provider=state.agent.provider, now=now)
    return state.evidence.learn(breaker_open=is_open)


_GATHER: dict[Ask, Callable[[TurnState, Need, datetime], Evidence]] = {
    Ask.BREAKER: _breaker,
    Ask.READY: _ready,
    Ask.SETTINGS: _settings,
    Ask.ASSIGNED: _assigned,
    Ask.AFFINITY: _affinity,
    Ask.AFFINITY_PLAN: _affinity_plan,
    Ask.POOL_SIZE: _pool_size,
    Ask.SELECTION: _selection,
    Ask.KEY: _key,
    Ask.CURRENT: _current,
    Ask.RUNGS: _rungs,
    Ask.FORECAST: _forecast,
    Ask.READINGS: _readings,
    Ask.PLACEMENT: _placement,
    Ask.PLACEMENT_DUE: _placement_due,
    Ask.PLANNED: _planned,
    Ask.BREAKER_FAILURE: _breaker_failure,
    Ask.BREAKER_OPEN: _breaker_open,
}


def _breaker_read(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Admitted unless the breaker is open (a read: never the half-open trial's claim)."""
    view = breaker.breaker_read(provider=state.agent.provider, now=now)
    return replace(state.evidence, admitted=view.state is not breaker.BreakerState.OPEN)


def _breaker_failure_read(state: TurnState, need: Need, now: datetime) -> Evidence:
    """Whether the last failure would open the breaker; the explainer simulates quota
    refusals only, which never count (nothing is written either way)."""
    last = state.evidence.attempts[-1]
    counts = breaker.is_provider_failure(last.outcome.error_code)
    return state.evidence.learn(
        breaker_after=counts and breaker.breaker_open_now(provider=state.agent.provider, now=now)
    )


_READ: dict[Ask, Callable[[TurnState, Need, datetime], Evidence]] = {
    Ask.BREAKER: _breaker_read,
    Ask.READY: _agent_facts,
    Ask.BREAKER_FAILURE: _breaker_failure_read,
    Ask.PLACEMENT_DUE: _placement_due_read,
}
