"""The order of a turn, once: given everything known about a turn now, its next action.

``plan`` reads top to bottom as a turn runs:

1. the provider's breaker admits the turn (open: it fails fast, nothing sent);
2. the agent is ready (started; no forbidden boot key);
3. an assignment a rule forbids (``eligibility.admit`` on its row, judged with the
   agent's readiness: paused by an admin; not allowed by the routing policy) routes to
   a plan the turn may use (the key too, unless the policy forbade it) or refuses the
   turn;
4. the first rung: the session's previous plan (affinity); else pre-dispatch (the
   assignment is known not to serve, or forecast to run out before the turn ends:
   then only to a plan that is not); else the week plan's entry for the agent while
   it is current (``planned``: its plan, or the key for a spill); else placement (a
   plan whose weekly headroom expires sooner, or a better balanced one); else the
   assignment;
5. every ``Send`` checks the time budget; applying it, the executor takes the plan's
   concurrency lease (full: ``Busy``, routed around), reserves the key's budget
   (closed: ``BudgetRefused``, park or fail), and sends;
6. served: ``Finish`` (the switch to commit, the notice);
7. refused: ``walking.after_refusal`` (breaker, the single retry, the record, the
   walk's gates, the next rung) and ``ending`` (park or fail with the trail).

Whether a plan may serve is never decided here: every verdict is ``admit``'s, read
from the evidence (the assignment's, the session's plan's, each ranked plan's). Pure:
no Django, no I/O, ``now`` is an argument. A missing piece of evidence is asked for
(``Need``); the executor gathers it and asks again.
"""

from __future__ import annotations

from datetime import datetime

from routing import policy
from routing.eligibility import Admitted, Excluded, Reason
from routing.facts import AgentFacts
from routing.headroom.classification import Tier
from routing.headroom.placement import CANDIDATES as PLACEMENT_CANDIDATES
from routing.planner.actions import (
    AFFINITY_STAGE,
    PLACEMENT_STAGE,
    PRE_DISPATCH_STAGE,
    ROUTED_KEY,
    ROUTED_PLAN,
    Action,
    Ask,
    Fail,
    Need,
    Send,
)
from routing.planner.ending import finish, key_budget_stop, outage, policy_refused
from routing.planner.evidence import UNKNOWN, BudgetRefused, Busy, Evidence, Unreachable
from routing.planner.lookups import (
    look_selection,
    may_switch,
    move_to,
    pre_dispatch_choice,
    rung_of,
    sent,
    settings_of,
)
from routing.planner.planned import planned_or_placement
from routing.planner.walking import after_refusal, around_cap
from routing.rung import RungKind
from routing.walk import Stop, Why


def plan(evidence: Evidence, *, now: datetime) -> Action:
    """The turn's next action, from the last thing that happened to it."""
    last = evidence.history[-1] if evidence.history else None
    if last is None:
        return _opening(evidence, now=now)
    if isinstance(last, Busy):
        return around_cap(evidence, last, now=now)
    if isinstance(last, BudgetRefused):
        return key_budget_stop(evidence, last.closure, now=now)
    if isinstance(last, Unreachable):
        return Fail(error_code="container_fault", detail=last.detail)
    if last.outcome.ok:
        return finish(evidence, last)
    return after_refusal(evidence, last, now=now)


def _opening(evidence: Evidence, *, now: datetime) -> Action:
    """Before anything is sent: the breaker, readiness, the assignment's verdict, then
    the first rung."""
    if evidence.admitted is None:
        return Need(Ask.BREAKER)
    if not evidence.admitted:
        return outage(evidence)
    if evidence.ready:
        return Fail(error_code="container_fault", detail=evidence.ready)
    agent = evidence.agent
    if agent is None:
        return Need(Ask.READY)
    if agent.policy_refusal:
        # No assignment, and the policy allows no credential without one
        # (subscription-only never bills the key).
        return policy_refused(evidence, agent.policy_refusal, Stop.POLICY, now=now)
    assigned = evidence.assigned
    if isinstance(assigned, Excluded) and assigned.forbidden:
        # A rule keeps every turn off the assignment (an admin paused it; the policy
        # does not allow it): the readiness read judged its row already, no cache
        # read needed. Another plan, or refused; never sent there.
        return _leave(evidence, assigned, now=now)
    first = (
        _affinity(evidence, agent)
        or _pre_dispatch(evidence, agent, now=now)
        or planned_or_placement(
            evidence, agent, lambda: _placement(evidence, agent, now=now), now=now
        )
    )
    return sent(evidence, first or Send(agent.baseline, Why.ASSIGNED), now=now)


def _leave(evidence: Evidence, verdict: Excluded, *, now: datetime) -> Action:
    """The best viable plan the turn may use instead of its forbidden assignment (the
    key too, unless the policy forbade it: subscription-only never bills the key),
    else the turn is refused with the verdict's reason. Never when the agent may not
    leave its plan (pinned, auto-switch off): then it is refused."""
    by_policy = verdict.reason is Reason.POLICY
    settings = settings_of(evidence)
    if isinstance(settings, Need):
        return settings
    if settings.switching_stop is None:
        choice = pre_dispatch_choice(
            evidence, including_last=False, now=now, key_wanted=not by_policy
        )
        if isinstance(choice, Need):
            return choice
        pick = choice[1]
        rung = rung_of(evidence, pick) if pick is not None else None
        if isinstance(rung, Need):
            return rung
        if rung is not None and rung.kind is RungKind.API_KEY:
            return sent(evidence, Send(rung, Why.API_KEY, routed=ROUTED_KEY), now=now)
        if rung is not None:
            why = Why.POLICY if by_policy else Why.PRE_DISPATCH
            return sent(evidence, Send(rung, why, routed=ROUTED_PLAN), now=now)
    return policy_refused(evidence, verdict.detail, verdict.reason, now=now)


def _affinity(evidence: Evidence, agent: AgentFacts) -> Send | Need | None:
    """A chat turn starts on the plan that served its session's previous turn while that
    plan is eligible (a warm prompt cache). Only a turn with a session pays for it; a
    failed read only skips it."""
    if not evidence.turn.session_id or agent.origin is None or AFFINITY_STAGE in evidence.skipped:
        return None
    previous = evidence.previous
    if previous is UNKNOWN:
        return Need(Ask.AFFINITY, stage=AFFINITY_STAGE)
    if previous is None:
        return None
    settings = settings_of(evidence, AFFINITY_STAGE)
    if isinstance(settings, Need):
        return settings
    target = policy.affinity_target(
        policy=agent.routing_policy,
        auto_switch=settings.auto_switch,
        assigned_id=agent.origin,
        previous_kind=previous.kind,
        previous_subscription_id=previous.subscription_id,
    )
    if target is None:
        return None
    kept = evidence.affinity_plan
    if kept is UNKNOWN:
        return Need(Ask.AFFINITY_PLAN, (target,), stage=AFFINITY_STAGE)
    return Send(kept, Why.AFFINITY) if kept is not None else None


def _pre_dispatch(evidence: Evidence, agent: AgentFacts, *, now: datetime) -> Send | Need | None:
    """Route the first attempt elsewhere when the assignment is known not to serve, or is
    forecast to run out before the turn would end (then only to another plan that is
    not: it still serves now, so never to the billed key). None: dispatch as assigned
    (also when a read fails: an optimisation must not fail a turn that could run)."""
    stage = PRE_DISPATCH_STAGE
    if agent.origin is None or stage in evidence.skipped:
        return None
    assigned = evidence.assigned
    if assigned is None:
        return Need(Ask.ASSIGNED, stage=stage)
    # Admitted: it serves, and only a forecast that it runs out moves the turn.
    forecast_only = isinstance(assigned, Admitted)
    if isinstance(assigned, Admitted) and not assigned.forecast_out:
        return None
    switching = may_switch(evidence, stage)
    if isinstance(switching, Need):
        return switching
    if not switching:
        return None
    choice = pre_dispatch_choice(
        evidence, including_last=False, now=now, stage=stage, key_wanted=not forecast_only
    )
    if isinstance(choice, Need):
        return choice
    walk, pick = choice
    if pick is None:
        return None
    if (
        forecast_only
        and pick.subscription_id is not None
        and pick.subscription_id == walk.returning
    ):
        return None  # a forecast never flips the agent straight back to the plan it left
    if forecast_only and pick.subscription_id is not None:
        out = evidence.facts.forecast_out.get(pick.subscription_id)
        if out is None:
            return Need(Ask.FORECAST, (pick.subscription_id,), stage=stage)
        if out:
            return None
    rung = rung_of(evidence, pick, stage)
    if rung is None or isinstance(rung, Need):
        return rung
    if rung.kind is RungKind.API_KEY:
        return Send(rung, Why.API_KEY, routed=ROUTED_KEY)
    return Send(rung, Why.PRE_DISPATCH, routed=ROUTED_PLAN)


def _placement(evidence: Evidence, agent: AgentFacts, *, now: datetime) -> Send | Need | None:
    """Start on a better plan than the assignment while nothing refuses: one whose weekly
    headroom expires soonest, else the best balanced one past the hysteresis
    (``routing.headroom.placement``); the served turn commits the move. Not
    within ``DWELL`` of the agent's last move, never when the agent may not switch,
    and a failed read only skips it."""
    stage = PLACEMENT_STAGE
    if agent.origin is None:
        return None
    if evidence.skipped & {stage, PRE_DISPATCH_STAGE}:  # the assignment's read failed
        return None
    assigned = evidence.assigned
    if assigned is None:
        return Need(Ask.ASSIGNED, stage=stage)
    if not (isinstance(assigned, Admitted) and assigned.placeable):
        return None
    selection = look_selection(evidence, agent, stage, now=now)
    if selection is None or isinstance(selection, Need):
        return selection
    target = evidence.facts.placement
    if target is UNKNOWN:
        measured = tuple(
            r.candidate.subscription_id
            for r in selection.ranked
            if r.tier is Tier.MEASURED and r.readmitted is None
        )[:PLACEMENT_CANDIDATES]
        if not measured:
            return None
        return Need(Ask.PLACEMENT, measured, stage=stage)
    if target is None:
        return None
    return move_to(evidence, selection, target, Why.PLACEMENT, stage)
