"""The assignment's verdict for a test that holds what the cache read
(``TurnEvidence``): ``admit`` on it, as the executor asks (``execution/gathering.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from agents.models import Agent
from routing.eligibility import Admission, Admitted, Candidate, Excluded, PlanFacts, Role
from routing.rung import Rung
from subscriptions.headroom.selection import agent_admission
from subscriptions.headroom.store import TurnEvidence
from subscriptions.plan_facts import fresh_for, plan_facts_read, session_plan_read, skip_window


def assignment_verdict(
    evidence: TurnEvidence,
    *,
    now: datetime,
    family: str | None = None,
    expected_turn: timedelta = timedelta(0),
    subscription_id: int = 1,
) -> Admitted | Excluded:
    """``admit`` on the assignment ``subscription_id`` whose cache holds ``evidence``."""
    mark = evidence.refusal
    candidate = Candidate(
        subscription_id,
        "plan",
        0,
        mark.at if mark is not None else None,
        mark.resets_at if mark is not None else None,
        mark.limiting_window if mark is not None else None,
        mark.failure_kind if mark is not None else None,
    )
    facts = PlanFacts(candidate, evidence.reading, evidence.forecast, evidence.reachable)
    admission = Admission(
        now=now,
        provider="anthropic",
        origin=subscription_id,
        family=family,
        max_age=fresh_for(),
        skip_window=skip_window(),
        expected_turn=expected_turn,
    )
    return admission.judge(facts, Role.ASSIGNED)


def assigned_refusing(evidence: TurnEvidence, *, now: datetime, family: str | None = None) -> bool:
    """Whether the assignment is known not to serve now (pre-dispatch routes around it)."""
    verdict = assignment_verdict(evidence, now=now, family=family)
    return isinstance(verdict, Excluded) and verdict.not_serving


def agent_assignment_verdict(agent: Agent, *, now: datetime) -> Admitted | Excluded:
    """``admit`` on ``agent``'s assignment as its turn asks (its row and its cache)."""
    assert agent.subscription is not None
    facts = plan_facts_read(agent.subscription)
    return agent_admission(agent, now=now).judge(facts, Role.ASSIGNED)


def session_rung(agent: Agent, subscription_id: int, *, now: datetime) -> Rung | None:
    """The rung a chat turn of ``agent`` stays on for the session's plan
    ``subscription_id``, or None: what the executor's affinity gatherer keeps."""
    facts, rung = session_plan_read(subscription_id, provider=agent.provider)
    verdict = agent_admission(agent, now=now).judge(facts, Role.SESSION)
    return rung if isinstance(verdict, Admitted) else None
