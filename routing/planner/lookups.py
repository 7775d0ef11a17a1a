"""The planner's reads of its evidence: each returns the fact, or the ``Need`` that
gathers it. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from routing.attempt_refusal import AttemptRefusal, QuotaEvidence, classify_attempt_refusal
from routing.facts import AgentFacts
from routing.headroom.alternatives import Selection
from routing.headroom.placement import settled
from routing.headroom.recovery import earliest_known_reset
from routing.planner.actions import ROUTED_PLAN, Ask, Fail, Need, Send
from routing.planner.evidence import Attempt, BudgetRefused, Busy, Event, Evidence, SettingsFacts
from routing.planner.texts import NOT_SENT_IN_TIME
from routing.rung import KEY_RUNG, RungKind, RungRef
from routing.walk import Pick, Stop, Walk, Why, pre_dispatch_pick, walk_start

# Stops that mean every credential the walk could try refused.
EXHAUSTED_STOPS = frozenset({Stop.EXHAUSTED, Stop.ALREADY_TRIED, Stop.RUNG_CAP})
# A turn with less than this left is not sent at all.
SEND_FLOOR_SECONDS = 1


def agent_of(evidence: Evidence) -> AgentFacts:
    """The ready agent's facts (every stage after readiness has them)."""
    agent = evidence.agent
    assert agent is not None  # noqa: S101 - the opening stage asks READY first
    return agent


def settings_of(evidence: Evidence, stage: str = "") -> SettingsFacts | Need:
    return evidence.settings or Need(Ask.SETTINGS, stage=stage)


def may_switch(evidence: Evidence, stage: str = "") -> bool | Need:
    """Whether the settings let the agent leave its assignment (not pinned, auto-switch
    on), or the ``Need`` that reads them."""
    settings = settings_of(evidence, stage)
    if isinstance(settings, Need):
        return settings
    return settings.switching_stop is None


def refusal_of(attempt: Attempt) -> AttemptRefusal:
    """What a refused attempt means (``routing/attempt_refusal.py``)."""
    outcome = attempt.outcome
    return classify_attempt_refusal(
        error_code=outcome.error_code,
        detail=outcome.detail,
        evidence=QuotaEvidence(outcome.resets_at, outcome.limiting_window),
    )


def _retry(event: Event | None) -> bool:
    return isinstance(event, Attempt | Busy | BudgetRefused) and event.retry


def retried(evidence: Evidence) -> bool:
    """Whether the turn already spent its single re-send after a provider error."""
    return any(_retry(event) for event in evidence.history)


def walk_of(evidence: Evidence, *, including_last: bool) -> Walk:
    """The walk so far, rebuilt from the history: every refused attempt the turn walked
    on from (not one it re-sent after a provider error), and every plan found at its
    cap (tried: not offered again). ``including_last``: the last attempt walks too."""
    agent = agent_of(evidence)
    walk = walk_start(
        origin=agent.origin,
        autonomous=evidence.turn.autonomous,
        subscription_count=evidence.pool_size or 0,
        deadline=evidence.turn.budget_end,
        returning=agent.moved_from,
    )
    events = evidence.history
    for index, event in enumerate(events):
        following = events[index + 1] if index + 1 < len(events) else None
        if isinstance(event, Busy):
            busy = event.rung.subscription_id
            if busy is not None and busy not in walk.tried:
                walk.tried.append(busy)
        elif isinstance(event, Attempt) and not event.outcome.ok and not _retry(following):
            if following is None and not including_last:
                continue
            ran_on = event.ran_on
            walk.record(
                kind=ran_on.kind if ran_on else RungKind.SUBSCRIPTION,
                subscription_id=ran_on.subscription_id if ran_on else agent.origin,
                name=ran_on.name if ran_on else "",
                why=event.why,
                served=False,
                reason=refusal_of(event).reason,
                resets_at=event.outcome.resets_at,
            )
    return walk


def selection_of(evidence: Evidence, walk: Walk, stage: str = "") -> Selection | Need:
    """This step's ranking of the plans not tried yet (the executor also leaves out the
    plans serving their concurrency cap)."""
    selection = evidence.facts.selection
    return selection or Need(Ask.SELECTION, tuple(walk.tried), stage=stage)


def key_available(evidence: Evidence, stage: str = "") -> bool | Need:
    """Whether the key rung is offered this step. Never to a legacy agent server: a
    restart-based key rung is what strands agents on the key."""
    if evidence.legacy.on:
        return False
    key = evidence.facts.key
    if key is None:
        return Need(Ask.KEY, stage=stage)
    return key.available


def ranked_and_key(
    evidence: Evidence, walk: Walk, stage: str = "", *, key_wanted: bool = True
) -> tuple[Selection, bool] | Need:
    """This step's ranking and whether the key rung is offered (False unless wanted)."""
    selection = selection_of(evidence, walk, stage)
    if isinstance(selection, Need):
        return selection
    key = key_available(evidence, stage) if key_wanted else False
    if isinstance(key, Need):
        return key
    return selection, key


def pre_dispatch_choice(
    evidence: Evidence,
    *,
    including_last: bool,
    now: datetime,
    stage: str = "",
    key_wanted: bool = True,
) -> tuple[Walk, Pick | None] | Need:
    """The walk so far and the plan (or key) a turn not sent where it would go is
    routed to instead (``walk.pre_dispatch_pick``; None: nothing to route to)."""
    walk = walk_of(evidence, including_last=including_last)
    ranked = ranked_and_key(evidence, walk, stage, key_wanted=key_wanted)
    if isinstance(ranked, Need):
        return ranked
    selection, key = ranked
    return walk, pre_dispatch_pick(walk, selection=selection, key_available=key, now=now)


def rung_of(evidence: Evidence, pick: Pick, stage: str = "") -> RungRef | Need | None:
    """The rung for ``pick`` once the executor holds its secret; None when it has none."""
    if pick.kind is RungKind.API_KEY:
        settings = settings_of(evidence, stage)
        if isinstance(settings, Need):
            return settings
        if not settings.key_configured:
            return None
        return KEY_RUNG._replace(name=settings.key_name)
    wanted = pick.subscription_id
    assert wanted is not None  # noqa: S101 - a subscription pick names its plan
    if wanted in evidence.rungs:
        return RungRef(RungKind.SUBSCRIPTION, wanted, evidence.rungs[wanted])
    if wanted in evidence.missing:
        return None
    return Need(Ask.RUNGS, (wanted,), stage=stage)


def earliest_reset(
    evidence: Evidence,
    ids: Iterable[int],
    *,
    refusal_resets: Iterable[datetime | None],
    now: datetime,
) -> datetime | None | Need:
    """The soonest known reset among the plans ``ids`` (their stored readings) and the
    resets refusals carried."""
    wanted = tuple(ids)
    readings = evidence.facts.readings
    if readings is None:
        if wanted:
            return Need(Ask.READINGS, wanted)
        readings = {}
    return earliest_known_reset(
        (readings[i] for i in wanted if i in readings), now=now, refusal_resets=refusal_resets
    )


def sent(evidence: Evidence, choice: Send | Need, *, now: datetime) -> Send | Need | Fail:
    """``choice``, unless the turn's time budget is too short to send anything."""
    if isinstance(choice, Need):
        return choice
    if (evidence.turn.budget_end - now).total_seconds() < SEND_FLOOR_SECONDS:
        return Fail(error_code="timeout", detail=NOT_SENT_IN_TIME)
    return choice


def look_selection(
    evidence: Evidence, agent: AgentFacts, stage: str, *, now: datetime
) -> Selection | Need | None:
    """The ranking a move at a turn boundary (placement, a planned move) picks from,
    once its gates pass: the agent has settled since its last move, its look is due
    (claimed first: a cache read, so a turn between looks reads no settings row), and
    it may switch. None: no move now."""
    if not settled(agent.moved_at, now=now):
        return None
    due = evidence.facts.placement_due
    if due is None:
        return Need(Ask.PLACEMENT_DUE, stage=stage)
    if not due:
        return None
    switching = may_switch(evidence, stage)
    if isinstance(switching, Need) or not switching:
        return switching or None
    return selection_of(evidence, walk_of(evidence, including_last=False), stage)


def move_to(
    evidence: Evidence, selection: Selection, target: int, why: Why, stage: str
) -> Send | Need | None:
    """Start the turn on ``target`` when the ranking admits it (``why`` placement or
    planned, routed to a plan); None when it does not or no secret is held."""
    name = next(
        (
            r.candidate.name
            for r in selection.ranked
            if r.candidate.subscription_id == target and r.readmitted is None
        ),
        None,
    )
    if name is None:
        return None
    rung = rung_of(evidence, Pick(RungKind.SUBSCRIPTION, target, name, why), stage)
    if rung is None or isinstance(rung, Need):
        return rung
    return Send(rung, why, routed=ROUTED_PLAN)
