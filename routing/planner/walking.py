"""After a refusal, and around a plan at its cap: retry, record, gate, walk. Pure."""

from __future__ import annotations

from datetime import datetime

from routing.attempt_refusal import AttemptRefusal
from routing.planner.actions import ROUTED_KEY, ROUTED_PLAN, Action, Ask, Need, Record, Send
from routing.planner.ending import at_capacity, outage, refused
from routing.planner.evidence import Attempt, Busy, Evidence
from routing.planner.lookups import (
    agent_of,
    pre_dispatch_choice,
    ranked_and_key,
    refusal_of,
    retried,
    rung_of,
    sent,
    settings_of,
    walk_of,
)
from routing.rung import RungKind
from routing.walk import (
    Pick,
    Stop,
    Walk,
    Why,
    may_reissue,
    walk_gate,
    walk_next,
)

UPSTREAM_ERROR = "upstream_error"


def after_refusal(evidence: Evidence, last: Attempt, *, now: datetime) -> Action:
    """``last`` refused. In order: a provider failure counts against the breaker (open:
    fail, no retry into the outage); a provider error is sent once more; the refusal is
    recorded against what it ran on (before auto-switch is read: concurrent turns see
    it, and an operator with auto-switch off still does); the walk's gates; the next rung."""
    refusal = refusal_of(last)
    facts = evidence.facts
    if facts.breaker_after is None:
        return Need(Ask.BREAKER_FAILURE)
    if facts.breaker_after:
        return outage(evidence)
    if _retries(evidence, refusal, now=now):
        # The same rung, as chosen: nothing is recorded or walked.
        return sent(evidence, Send(last.sent, last.why, retry=True), now=now)
    if not facts.recorded and refusal.failure_kind is not None and last.ran_on is not None:
        return Record(refusal)
    stop = walk_gate(refusal=refusal, origin=agent_of(evidence).origin)
    if stop is None:
        settings = settings_of(evidence)
        if isinstance(settings, Need):
            return settings
        stop = settings.switching_stop
    if stop is not None:
        walk = walk_of(evidence, including_last=False)
        return refused(evidence, refusal, last, stop, walk, now=now)
    return _next_rung(evidence, refusal, last, now=now)


def _retries(evidence: Evidence, refusal: AttemptRefusal, *, now: datetime) -> bool:
    """Send the same rung once more: only after an ``upstream_error``, at most once per
    turn, and only with the re-issue floor of the budget left.

    A provider 5xx says nothing about the credential, so it never walks: every plan
    would meet the same outage, and blaming one would skip-list it. One retry rides out
    a blip; a second would spend the budget re-issuing into an outage.
    """
    if refusal.error_code != UPSTREAM_ERROR or retried(evidence):
        return False
    return may_reissue(evidence.turn.budget_end, now=now)


def _next_rung(
    evidence: Evidence, refusal: AttemptRefusal, last: Attempt, *, now: datetime
) -> Action:
    """The walk's next rung after ``last`` (recorded in the walk), or how it ends."""
    if evidence.pool_size is None:
        return Need(Ask.POOL_SIZE)
    walk = walk_of(evidence, including_last=True)
    if evidence.legacy.on and evidence.legacy.restarts >= 1:
        # At most one rung may need a restart (a recreate kills the agent's other turns).
        return refused(evidence, refusal, last, Stop.EXHAUSTED, walk, now=now)
    pick = _pick(evidence, refusal, last, walk, now=now)
    if isinstance(pick, Need):
        return pick
    if not isinstance(pick, Pick):
        return refused(evidence, refusal, last, pick, walk, now=now)
    breaker_open = evidence.facts.breaker_open
    if breaker_open is None:
        return Need(Ask.BREAKER_OPEN)
    if breaker_open:
        return outage(evidence)  # the next rung would meet the outage
    rung = rung_of(evidence, pick)
    if isinstance(rung, Need):
        return rung
    if rung is None:
        return refused(evidence, refusal, last, Stop.EXHAUSTED, walk, now=now)
    if not evidence.legacy.on:
        return sent(evidence, Send(rung, pick.why), now=now)
    # A legacy agent server applies a rung by assignment (commit, then hot-reload).
    if rung.kind is not RungKind.SUBSCRIPTION or evidence.legacy.assignment is None:
        return refused(evidence, refusal, last, Stop.EXHAUSTED, walk, now=now)
    return sent(evidence, Send(rung, pick.why, reassign=True), now=now)


def _pick(
    evidence: Evidence, refusal: AttemptRefusal, last: Attempt, walk: Walk, *, now: datetime
) -> Pick | Stop | Need:
    current = evidence.facts.current
    if current is None:
        return Need(Ask.CURRENT)
    origin = agent_of(evidence).origin
    if (
        last.why is Why.AFFINITY
        and current.subscription_id == origin
        and origin not in walk.tried
        and may_reissue(walk.deadline, now=now)
    ):
        # The session's plan refused: the turn goes where it would have gone, its
        # assignment (which the ranking leaves out).
        return Pick(RungKind.SUBSCRIPTION, origin, current.name, Why.ASSIGNED)
    ranked = ranked_and_key(evidence, walk)
    if isinstance(ranked, Need):
        return ranked
    selection, key = ranked
    return walk_next(
        walk,
        refusal=refusal,
        selection=selection,
        key_available=key,
        now=now,
        current_assignment=current.subscription_id,
        current_name=current.name,
    )


def around_cap(evidence: Evidence, busy: Busy, *, now: datetime) -> Action:
    """``busy``'s plan serves its concurrency cap: like a plan known not to serve, the
    best viable alternative, else the key rung; else the turn fails unsent (so it does
    when the agent may not switch, or applies rungs by assignment). The busy plan is not
    offered again this turn. Before any attempt this is pre-dispatch routing."""
    if evidence.legacy.on:
        return at_capacity(busy)
    settings = settings_of(evidence)
    if isinstance(settings, Need):
        return settings
    if settings.switching_stop is not None:
        return at_capacity(busy)
    choice = pre_dispatch_choice(evidence, including_last=True, now=now)
    if isinstance(choice, Need):
        return choice
    pick = choice[1]
    rung = rung_of(evidence, pick) if pick is not None else None
    if isinstance(rung, Need):
        return rung
    if pick is None or rung is None:
        return at_capacity(busy)
    if evidence.attempts:
        return sent(evidence, Send(rung, pick.why), now=now)
    routed = ROUTED_KEY if rung.kind is RungKind.API_KEY else ROUTED_PLAN
    return sent(evidence, Send(rung, Why.AT_CAPACITY, routed=routed), now=now)
