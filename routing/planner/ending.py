"""How a planned turn ends: served (the switch to commit, the notice), or refused
(parked until a known reset, or failed with the trail and the earliest reset). Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from routing import policy
from routing.attempt_refusal import QUOTA_REASONS, AttemptRefusal
from routing.eligibility import Excluded, Reason
from routing.facts import AgentFacts
from routing.plan_ahead.week_plan import Planned
from routing.planner.actions import Ask, Fail, Finish, Need, Notice, Park, Switch
from routing.planner.evidence import Attempt, Busy, Closure, Evidence
from routing.planner.lookups import (
    EXHAUSTED_STOPS,
    agent_of,
    earliest_reset,
    refusal_of,
    selection_of,
    walk_of,
)
from routing.planner.park import park_until
from routing.planner.texts import POLICY_NO_KEY, at_capacity_detail, outage_detail
from routing.rung import RungKind, RungRef
from routing.walk import Stop, Walk, Why

Ending = Park | Fail | Need

# A plan kept for a session or taken while the assignment is busy commits no switch:
# sessions on two plans would flip the assignment back and forth; a busy plan is not
# a failing one.
NO_COMMIT = frozenset({Why.AFFINITY, Why.AT_CAPACITY})


def finish(evidence: Evidence, served: Attempt) -> Finish:
    """The served turn: what served it, the switch to record and commit, the notice."""
    agent = agent_of(evidence)
    ran_on, why = served.ran_on, served.why
    switched = ran_on is not None and ran_on.key != (RungKind.SUBSCRIPTION.value, agent.origin)
    plain = not switched and (
        ran_on is None or (ran_on.kind is RungKind.SUBSCRIPTION and not agent.on_api_key)
    )
    switch = None
    throttled = switched and origin_throttled(evidence)
    if switched and ran_on is not None and why not in NO_COMMIT:
        commit = (
            ran_on.kind is RungKind.SUBSCRIPTION
            and ran_on.subscription_id is not None
            and agent.origin is not None
            and not evidence.legacy.on  # a legacy walk committed each rung as it applied it
            # A throttle is over in a minute: the plan serves again, so the agent stays.
            and not throttled
        )
        reason = switch_reason(evidence, ran_on, why)
        if throttled:
            reason["throttled"] = True
        switch = Switch(reason=reason, commit=commit)
    notice = _notice(agent, ran_on, why)
    if throttled and notice is None and ran_on is not None:
        notice = Notice.THROTTLE_DETOUR
    return Finish(ran_on, why, switch, notice, plain)


def origin_throttled(evidence: Evidence) -> bool:
    """Whether the turn left its assignment only because of a throttle (a 429 without
    quota evidence): every refusal the assigned plan gave this turn was one, or it was
    routed around before dispatch on a throttle's backoff alone. Legacy walks and turns
    without an assignment never count."""
    agent = agent_of(evidence)
    if agent.origin is None or evidence.legacy.on:
        return False
    own = [
        a
        for a in evidence.attempts
        if not a.outcome.ok
        and (a.ran_on is None or a.ran_on.key == (RungKind.SUBSCRIPTION.value, agent.origin))
    ]
    if own:
        return all(refusal_of(a).throttle for a in own)
    assigned = evidence.assigned
    return isinstance(assigned, Excluded) and assigned.reason is Reason.THROTTLED


def _notice(agent: AgentFacts, ran_on: RungRef | None, why: Why) -> Notice | None:
    """The key served a walk that found no plan (said once until a plan serves again),
    or a plan serves an agent that was billing the key."""
    if ran_on is None:
        return None
    if ran_on.kind is RungKind.API_KEY:
        keyed = why in (Why.API_KEY, Why.SPILL)
        return Notice.API_KEY_ROUTE if keyed and not agent.on_api_key else None
    return Notice.SUBSCRIPTION_RETURN if agent.on_api_key else None


def _unrefused_reason(evidence: Evidence, why: Why) -> str:
    """Why a turn left its assignment when nothing refused it."""
    if why is Why.POLICY:
        return "its routing policy does not allow its subscription"
    if why is Why.PLACEMENT:
        return "another plan's weekly headroom expires sooner"
    if why in (Why.PLANNED, Why.SPILL) and isinstance(evidence.planned, Planned):
        return evidence.planned.text()
    if why in (Why.PLANNED, Why.SPILL):
        return "the week plan placed it there"
    assigned = evidence.assigned
    if isinstance(assigned, Excluded) and assigned.forbidden:
        return assigned.detail  # e.g. its subscription is paused
    return "its subscription was known not to serve"


def switch_reason(evidence: Evidence, ran_on: RungRef, why: Why) -> dict[str, Any]:
    """The served rung's reason: how it was chosen and what refused before it."""
    refused = [a for a in evidence.attempts if not a.outcome.ok]
    names = "; ".join(
        f"{(a.ran_on.name if a.ran_on else '') or 'platform API key'} "
        f"{'throttled' if refusal_of(a).throttle else 'refused'}"
        for a in refused
    )
    reason: dict[str, Any] = {
        "why": why.value,
        "refused": names or _unrefused_reason(evidence, why),
    }
    selection = evidence.last_selection
    if selection is not None and ran_on.subscription_id is not None:
        # The ranking's own explanation for the chosen subscription, when it ranked.
        for ranked in selection.ranked:
            if ranked.candidate.subscription_id == ran_on.subscription_id:
                reason.update(selection.reason(ranked))
                break
    return reason


def outage(evidence: Evidence) -> Fail:
    """The provider's breaker is open: fail fast (unsent, or not retried anywhere)."""
    return Fail(
        error_code="upstream_error",
        detail=outage_detail(evidence.turn.provider, sent=bool(evidence.attempts)),
        walk_stop=Stop.PROVIDER_OUTAGE.value,
    )


def at_capacity(busy: Busy) -> Fail:
    return Fail(
        error_code="billing",
        detail=at_capacity_detail(busy.rung.name),
        walk_stop=Stop.AT_CAPACITY.value,
    )


def _parks(evidence: Evidence, resets_at: datetime | None, *, now: datetime) -> datetime | None:
    """The instant the turn would park until for ``resets_at`` (``park.park_until``)."""
    turn = evidence.turn
    return park_until(
        autonomous=turn.autonomous,
        waits=turn.waits,
        max_wait_seconds=turn.max_wait_seconds,
        resets_at=resets_at,
        created_at=turn.created_at,
        now=now,
    )


def refused(
    evidence: Evidence,
    refusal: AttemptRefusal,
    last: Attempt,
    stop: Stop,
    walk: Walk,
    *,
    now: datetime,
) -> Ending:
    """The walk stops at ``stop`` after ``last`` refused: an exhausted walk parks or fails
    with its trail; any other stop fails with the refusal's own code."""
    if walk.trail and stop in EXHAUSTED_STOPS:
        return exhausted(evidence, refusal, walk, stop, now=now)
    # A quota or credit refusal that ends the turn is billing; the rest keep theirs.
    error_code = "billing" if refusal.quota else refusal.error_code
    detail = last.outcome.detail
    if walk.trail and stop is Stop.BUDGET:
        detail = f"{walk.trail_text()}; the turn's time budget ran out before another try."
    resets = last.outcome.resets_at
    walk_stop = stop.value if refusal.walks else ""
    if refusal.error_code == "billing":
        # The forwarder refused the key at the turn's budget: the key budget stopped it.
        walk_stop = Stop.KEY_BUDGET.value
    return Fail(
        error_code=error_code,
        detail=detail,
        walk_stop=walk_stop,
        resets_at=resets if resets is not None and resets > now else None,
    )


def exhausted(
    evidence: Evidence, refusal: AttemptRefusal, walk: Walk, stop: Stop, *, now: datetime
) -> Ending:
    """Every candidate refused: park an autonomous turn that may wait for a known plan
    reset, else fail (billing if quota or credit refused anywhere; auth when only dead
    credentials did) with the earliest known reset, telling the operator once."""
    quota = any(t.reason in QUOTA_REASONS for t in walk.trail)
    detail = f"{walk.trail_text()}; every candidate refused."
    if not policy.key_allowed(agent_of(evidence).routing_policy):
        detail += POLICY_NO_KEY
    tried = [t.subscription_id for t in walk.trail if t.subscription_id is not None]
    plan_reset = earliest_reset(
        evidence, tried, refusal_resets=[t.resets_at for t in walk.trail], now=now
    )
    if isinstance(plan_reset, Need):
        return plan_reset
    closed = _key_closure(evidence, walk)
    if isinstance(closed, Need):
        return closed
    resets_at = plan_reset
    if closed is not None:
        # The key would have been the next rung: say which budget kept it out.
        stop = Stop.KEY_BUDGET
        detail = f"{walk.trail_text()}; every plan refused and {closed.reason}."
        resets_at = min(resets_at or closed.reopens_at, closed.reopens_at)
    # Never for dead credentials only (no reset brings those back), and a closed key
    # budget alone is no reset to wait for: a plan's must be known.
    until = _parks(evidence, resets_at if plan_reset is not None else None, now=now)
    if quota and until is not None:
        return Park(
            until=until, detail=detail, walk_stop=stop.value, exhausted=True, key_closed=closed
        )
    return Fail(
        error_code="billing" if quota else "auth",
        detail=detail,
        walk_stop=stop.value if refusal.walks else "",
        resets_at=resets_at,
        exhausted=True,
        notify_exhausted=True,
        key_closed=closed,
    )


def _key_closure(evidence: Evidence, walk: Walk) -> Closure | None | Need:
    """The consumed budget that kept the key rung out of this walk, or None."""
    if evidence.legacy.on or walk.key_tried:
        return None
    key = evidence.facts.key
    if key is None:
        return Need(Ask.KEY)
    return key.budget


def key_budget_stop(evidence: Evidence, closed: Closure, *, now: datetime) -> Ending:
    """A key budget refused the key rung's reservation: billing, ``key_budget``, the
    budget in the detail, and the earliest instant anything could serve (a plan's known
    reset or the budget's new period); an autonomous turn may wait for a plan's reset."""
    walk = walk_of(evidence, including_last=True)
    resets_at = closed.reopens_at
    known = None
    detail = f"{closed.reason[0].upper()}{closed.reason[1:]}; the key was not sent."
    if walk.trail:
        detail = f"{walk.trail_text()}; {closed.reason}, so the key was not sent."
        tried = [t.subscription_id for t in walk.trail if t.subscription_id is not None]
        known = earliest_reset(
            evidence, tried, refusal_resets=[t.resets_at for t in walk.trail], now=now
        )
        if isinstance(known, Need):
            return known
        if known is not None:
            resets_at = min(resets_at, known)
    until = _parks(evidence, resets_at if known is not None else None, now=now)
    stop = Stop.KEY_BUDGET.value
    if until is not None:
        return Park(until=until, detail=detail, walk_stop=stop)
    return Fail(error_code="billing", detail=detail, walk_stop=stop, resets_at=resets_at)


def policy_refused(evidence: Evidence, why_not: str, stop: str, *, now: datetime) -> Ending:
    """The turn may not run on its assignment (``why_not``: the policy forbids it, or an
    admin paused it; ``stop``: which), and no other credential it may use can serve:
    billing, with the earliest known reset among the plans it may use (none when
    unknown); an autonomous turn may wait for it."""
    agent = agent_of(evidence)
    selection = evidence.last_selection
    if selection is None and agent.origin is not None:
        found = selection_of(evidence, walk_of(evidence, including_last=False))
        if isinstance(found, Need):
            return found
        selection = found
    resets_at = None
    if selection is not None:
        # The refusing plans (dropped by the ranking) are the ones whose reset counts.
        allowed = [*selection.order(), *(c.subscription_id for c in selection.dropped)]
        known = earliest_reset(
            evidence,
            allowed,
            refusal_resets=[
                c.last_failure_resets_at for c in (*selection.last_resort, *selection.dropped)
            ],
            now=now,
        )
        if isinstance(known, Need):
            return known
        resets_at = known
    what = "no plan it allows" if stop == Stop.POLICY else "no other credential it may use"
    detail = f"Agent {agent.name!r}: {why_not}, and {what} can serve now."
    if resets_at is not None:
        detail += f" The earliest known reset is {resets_at.isoformat()}."
    until = _parks(evidence, resets_at, now=now)
    if until is not None:
        return Park(until=until, detail=detail, walk_stop=stop)
    return Fail(error_code="billing", detail=detail, walk_stop=stop, resets_at=resets_at)
