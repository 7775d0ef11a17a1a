"""Where an agent's next turn would run, and why: the routing explainer.

It asks the questions the turn asks (``execution/services.py::_Turn.run``), in the
same order and through the same functions: the provider's breaker
(``breaker.breaker_read``), the policy's verdict on the assignment
(``pool.assignment_policy_refusal``), the pre-dispatch check
(``pool.assigned_refusing`` and ``pool.assigned_forecast_exhausted`` on
``store.turn_evidence_read``, then ``walk.pre_dispatch_pick``), the concurrency caps
(``leases.subscriptions_at_capacity``), the ranking (``rank_alternatives``), the key
rung's gates (``pool.key_rung_state``: fallback, policy, opt-out, refusals, budgets),
the switching gate (``pool.switching_stop``) and, for the order after a refusal, the
walk itself (``walk.walk_next``, fed the same selection minus what it already tried).
It reads only the database and the cache (Redis reads, never a claim or a lease); it
never probes a provider and writes nothing.

What it cannot know: whether a plan will refuse this particular turn. The order it
gives is the walk's if every rung before refused. It explains a turn without a chat
session (a session's affinity to its previous plan is not considered).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from agents import lifecycle
from agents.models import Agent
from agents.rung import PLATFORM_KEY_LABEL, RungKind
from subscriptions import breaker, leases, pool
from subscriptions.classifier import classify_refusal
from subscriptions.headroom.alternatives import Selection
from subscriptions.headroom.balance import balance_of
from subscriptions.headroom.candidates import Candidate
from subscriptions.headroom.classification import Headroom, Tier, classify_headroom
from subscriptions.headroom.exhaustion_forecast import Forecast, earliest_exhaustion
from subscriptions.headroom.forecast_store import headroom_forecasts_read
from subscriptions.headroom.limited_now import reading_says_limited
from subscriptions.headroom.ranking import BALANCED
from subscriptions.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading
from subscriptions.headroom.recovery import earliest_known_reset
from subscriptions.headroom.refusal_windows import refusal_blocks
from subscriptions.headroom.selection import fresh_for, rank_alternatives
from subscriptions.headroom.store import TurnEvidence, snapshots_read, turn_evidence_read
from subscriptions.headroom.throttle import THROTTLE
from subscriptions.headroom.windows import family_window, turn_windows
from subscriptions.models import Subscription
from subscriptions.walk import (
    KEY_RATE_LIMIT_PAUSE,
    LAST_RESORT_MIN_AGE_AUTONOMOUS,
    Pick,
    Stop,
    Walk,
    Why,
    pre_dispatch_pick,
    walk_next,
    walk_start,
)
from trinity.selectors import system_settings_get

# The walk's order is what it would do if every rung before refused: a quota refusal.
_QUOTA_REFUSAL = classify_refusal(error_code="rate_limit", detail="")
# The order ignores the turn's time budget (the re-issue floor depends on the turn).
_NO_BUDGET_LIMIT = timedelta(days=1)
# Where the turn stops before any attempt (no walk happens).
PROVIDER_OUTAGE = "provider_outage"
AT_CAPACITY = "at_capacity"


class Excluded:
    """Why a subscription of the agent's provider is not on the walk's path."""

    REFUSING = "refusing"  # a fresh reading says it refuses: never tried
    FAMILY_BLOCKED = "family_blocked"  # refused (or reads blocked) for this model family
    THROTTLED = "throttled"  # a 429 without quota evidence: a short backoff
    SKIP_LISTED = "skip_listed"  # refused in the skip window and nothing readmits it yet
    AT_CAPACITY = "at_capacity"  # serving its concurrency cap
    POLICY = "policy"  # the agent's routing policy does not allow it
    NOT_OFFERED = "not_offered"  # the pool's filter left it out for another reason


@dataclass(frozen=True)
class Figures:
    """What the cached reading says of one subscription for this agent's model.

    ``score`` is the balanced strategy's (remaining / pace of the tightest window),
    set only under that strategy; ``limiting_window`` is then the window that set it.
    """

    tier: str | None = None
    band: int | None = None
    fullness: float | None = None
    score: float | None = None
    five_hour: float | None = None
    seven_day: float | None = None
    limiting_window: str | None = None
    resets_at: datetime | None = None
    reading_age_seconds: int | None = None
    # When the exhaustion forecast says a window this turn spends runs out.
    runs_out_at: datetime | None = None


@dataclass(frozen=True)
class RungLine:
    """One rung in the order the turn would try it."""

    position: int
    kind: str
    subscription_id: int | None
    name: str
    why: str
    figures: Figures = field(default_factory=Figures)
    last_refusal_at: datetime | None = None
    last_refusal_resets_at: datetime | None = None
    last_refusal_window: str | None = None


@dataclass(frozen=True)
class ExcludedLine:
    subscription_id: int
    name: str
    reason: str
    detail: str
    figures: Figures = field(default_factory=Figures)
    last_refusal_at: datetime | None = None
    last_refusal_resets_at: datetime | None = None
    last_refusal_window: str | None = None


@dataclass(frozen=True)
class AssignedLine:
    """The assigned plan, and whether the turn would start elsewhere.

    ``decided_by``: ``reading`` (a usable cached reading decided), ``refusal`` (a
    refusal in the skip window did, without a usable reading), ``no_evidence``, or
    ``unreachable`` (the cache did not answer: the turn dispatches as assigned).
    ``policy_refusal`` is why the agent's policy forbids it ("" when it may run there).
    """

    subscription_id: int
    name: str
    refusing: bool
    decided_by: str
    forecast_exhausted: bool = False
    at_capacity: bool = False
    policy_refusal: str = ""
    figures: Figures = field(default_factory=Figures)
    last_refusal_at: datetime | None = None
    last_refusal_kind: str | None = None
    last_refusal_resets_at: datetime | None = None
    last_refusal_window: str | None = None


@dataclass(frozen=True)
class KeyLine:
    available: bool
    closed: str | None = None
    detail: str = ""
    refused_at: datetime | None = None
    failure_kind: str | None = None
    reopens_at: datetime | None = None


@dataclass(frozen=True)
class Explanation:
    """Where the next turn of ``agent`` would run and why, at ``at``.

    ``first`` is the rung the first attempt runs on (None: the turn is refused
    before any attempt, see ``walk_stop``); ``pre_dispatch`` says why it is that one
    (``serving``, ``routed``, ``forecast``, ``no_alternative``, ``auto_switch_off``,
    ``pinned``, ``no_assignment``, ``policy``, ``at_capacity``, ``provider_outage``);
    ``rungs`` the order the turn would try if each refused, ending for
    ``walk_stop``; ``excluded`` the provider's subscriptions off that path and why.
    """

    agent: str
    at: datetime
    model: str
    family: str | None
    routing_policy: str
    strategy: str
    autonomous: bool
    breaker: str
    assigned: AssignedLine | None
    pre_dispatch: str
    first: RungLine | None
    rungs: list[RungLine]
    walk_stop: str
    excluded: list[ExcludedLine]
    key: KeyLine
    ranking_fallback: str | None

    def as_json(self) -> dict[str, Any]:
        """JSON-safe (ISO instants); never a secret (none is ever held here)."""
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


# Figures from a reading: labels of what the rules decided, never a decision.


def _limiting(
    reading: Reading | None, headroom: Headroom, family: str | None, now: datetime
) -> tuple[str | None, datetime | None]:
    """The window that limits the subscription for this turn (banded), and its reset.

    For a refusing reading the blocked window whose reset lifts the refusal; for a
    measured one the window whose figure is the ranking's fullness.
    """
    if reading is None:
        return None, None
    windows = [(n, reading.windows.get(n)) for n in (SEVEN_DAY, family, FIVE_HOUR) if n]
    present = [(n, w) for n, w in windows if w is not None]
    if headroom.tier is Tier.REFUSING:
        reset = earliest_known_reset([reading], now=now, family=family)
        blocked = [(n, w) for n, w in present if w.blocking]
        for name, window in blocked:
            if window.resets_at == reset:
                return name, reset
        return (blocked[0][0] if blocked else None), reset
    if headroom.fullness is not None:
        for name, window in present:
            if window.utilization == headroom.fullness:
                return name, window.resets_at
    return None, None


def _figures(st: _State, subscription_id: int, reading: Reading | None) -> Figures:
    family, strategy, now = st.family, st.strategy, st.now
    headroom = classify_headroom(reading, now=now, max_age=fresh_for(), family=family)
    window, resets_at = _limiting(reading, headroom, family, now)
    score = None
    if strategy == BALANCED and reading is not None:
        balance = balance_of(reading, now=now, max_age=fresh_for(), family=family)
        if balance is not None:
            score, window = balance.score, balance.window
            found = reading.windows.get(window)
            resets_at = found.resets_at if found is not None else None
    age = headroom.age_seconds(now)
    runs_out_at = earliest_exhaustion(
        st.forecasts.get(subscription_id),
        now=now,
        windows=turn_windows(family),
        max_age=fresh_for(),
    )
    return Figures(
        tier=headroom.tier.value,
        band=headroom.band,
        fullness=headroom.fullness,
        score=score,
        five_hour=headroom.five_hour,
        seven_day=headroom.seven_day,
        limiting_window=window,
        resets_at=resets_at,
        reading_age_seconds=int(age) if age is not None else None,
        runs_out_at=runs_out_at,
    )


def _without(selection: Selection, tried: set[int]) -> Selection:
    """The selection ``rank_alternatives(exclude_ids=tried)`` returns on the same
    state: ranking keeps the given order within a key, so removing candidates
    reorders none of the others."""
    return replace(
        selection,
        ranked=tuple(r for r in selection.ranked if r.candidate.subscription_id not in tried),
        last_resort=tuple(c for c in selection.last_resort if c.subscription_id not in tried),
    )


def _record(walk: Walk, pick: Pick) -> None:
    walk.record(
        kind=pick.kind,
        subscription_id=pick.subscription_id,
        name=pick.name,
        why=pick.why,
        served=False,
    )


def _walk_order(
    walk: Walk, selection: Selection, *, first: Pick, key_available: bool, now: datetime
) -> tuple[list[Pick], Stop]:
    """The picks ``walk_next`` makes if every rung refuses, and why it stops."""
    picks = [first]
    _record(walk, first)
    while True:
        step = walk_next(
            walk,
            refusal=_QUOTA_REFUSAL,
            selection=_without(selection, set(walk.tried)),
            key_available=key_available,
            now=now,
        )
        if not isinstance(step, Pick):
            return picks, step
        picks.append(step)
        _record(walk, step)


def _key_line(state: pool.KeyRungState) -> KeyLine:
    reopens = None
    if state.refused_at is not None:
        # The key's pause: 5 minutes after a 429, else until the refusal leaves the
        # skip window (the same constants ``key_refused_recently`` reads).
        pause = (
            KEY_RATE_LIMIT_PAUSE
            if state.failure_kind == "rate_limit"
            else timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)
        )
        reopens = state.refused_at + pause
    detail = ""
    if state.budget is not None:
        detail, reopens = state.budget.reason, state.budget.reopens_at
    return KeyLine(
        available=state.available,
        closed=state.closed.value if state.closed is not None else None,
        detail=detail,
        refused_at=state.refused_at,
        failure_kind=state.failure_kind,
        reopens_at=reopens,
    )


def _decided_by(evidence: TurnEvidence, refusing: bool, family: str | None, now: datetime) -> str:
    """Which evidence ``pool.assigned_refusing`` went by (a label; it decided)."""
    if not evidence.reachable:
        return "unreachable"
    mark = evidence.refusal
    decided = reading_says_limited(
        evidence.reading,
        now=now,
        max_age=fresh_for(),
        last_refusal_at=mark.at if mark is not None else None,
        family=family,
    )
    if decided is not None:
        return "reading"
    return "refusal" if refusing else "no_evidence"


@dataclass
class _State:
    """What one explanation reads once (the turn reads the same, lazily)."""

    agent: Agent
    now: datetime
    family: str | None
    strategy: str
    key: pool.KeyRungState
    at_capacity: set[int]
    selection: Selection
    walk: Walk
    stop: Stop | None
    forecasts: dict[int, Forecast] = field(default_factory=dict)


def _expected_turn(now: datetime) -> timedelta:
    # A turn with the default budget (``TRINITY_TURN_TIMEOUT_SECONDS``).
    budget_end = now + timedelta(seconds=settings.TRINITY_TURN_TIMEOUT_SECONDS)
    return pool.forecast_turn_length(now=now, budget_end=budget_end)


def _pre_dispatch(st: _State, assigned: AssignedLine, evidence: TurnEvidence) -> tuple[Pick, str]:
    """``_Turn._pre_dispatch``: the first rung, and why it is that one."""
    as_assigned = Pick(RungKind.SUBSCRIPTION, assigned.subscription_id, assigned.name, Why.ASSIGNED)
    if not assigned.refusing and not assigned.forecast_exhausted:
        return as_assigned, "serving"
    forecast_only = not assigned.refusing
    if st.stop is not None:
        return as_assigned, st.stop.value
    pick = pre_dispatch_pick(
        st.walk,
        selection=st.selection,
        key_available=not forecast_only and st.key.available,
        now=st.now,
    )
    if (
        forecast_only
        and pick is not None
        and pick.subscription_id is not None
        and pool.forecast_exhausted(
            pick.subscription_id,
            now=st.now,
            expected_turn=_expected_turn(st.now),
            family=st.family,
        )
    ):
        pick = None
    if pick is None:
        return as_assigned, "no_alternative"
    why = Why.API_KEY if pick.kind is RungKind.API_KEY else Why.PRE_DISPATCH
    return pick._replace(why=why), "forecast" if forecast_only else "routed"


def _first_rung(
    st: _State, assigned: AssignedLine | None, evidence: TurnEvidence | None
) -> tuple[Pick | None, str, Stop | str | None]:
    """``_Turn.run`` up to the first attempt: the first rung, why, and the stop when
    the turn ends before any attempt (or never walks)."""
    agent = st.agent
    if (
        assigned is not None
        and assigned.policy_refusal
        or assigned is None
        and pool.assignment_policy_refusal(agent)
    ):
        # ``_Turn._policy_route``: a plan the policy allows (never the key), or refused.
        if assigned is None or st.stop is not None:
            return None, "policy", Stop.POLICY
        pick = pre_dispatch_pick(st.walk, selection=st.selection, key_available=False, now=st.now)
        if pick is None or pick.kind is not RungKind.SUBSCRIPTION:
            return None, "policy", Stop.POLICY
        return pick._replace(why=Why.POLICY), "policy", None
    if assigned is None or evidence is None:
        # An agent without a plan runs on what it boots with and never walks.
        baseline = lifecycle.baseline_rung(agent)
        if baseline is None:
            return None, "no_assignment", Stop.NO_SUBSCRIPTION
        return (
            Pick(RungKind.API_KEY, None, PLATFORM_KEY_LABEL, Why.ASSIGNED),
            "no_assignment",
            Stop.NO_SUBSCRIPTION,
        )
    return (*_pre_dispatch(st, assigned, evidence), None)


def _around_cap(st: _State, first: Pick, pre_dispatch: str) -> tuple[Pick | None, str]:
    """``_Turn._route_around_cap`` before any attempt: a first rung at its cap moves to
    the best viable alternative (else the key), or the turn fails at capacity."""
    if first.subscription_id is None or first.subscription_id not in st.at_capacity:
        return first, pre_dispatch
    if st.stop is not None:
        return None, AT_CAPACITY
    if first.subscription_id not in st.walk.tried:
        st.walk.tried.append(first.subscription_id)
    pick = pre_dispatch_pick(
        st.walk, selection=st.selection, key_available=st.key.available, now=st.now
    )
    if pick is None:
        return None, AT_CAPACITY
    return pick._replace(why=Why.AT_CAPACITY), AT_CAPACITY


def routing_explain(
    *, agent: Agent, now: datetime, autonomous: bool = False, model: str = ""
) -> Explanation:
    """Where ``agent``'s next turn would run at ``now`` and why, without running it.

    ``autonomous`` explains a schedule/agent/mcp turn (the last resort waits 30
    minutes after a refusal for those); ``model`` a turn on that model (its family
    window decides family blocks), else the agent's. Reads the database and the cache
    only; never probes, never writes, never holds a secret in what it returns.
    """
    system = system_settings_get()
    model = model or agent.model  # a turn's model, else the agent's (as the turn reads it)
    family = family_window(model)
    provider = agent.provider
    rows = list(Subscription.objects.filter(provider=provider).order_by("name"))
    caps = {row.pk: row.max_concurrency for row in rows if row.max_concurrency is not None}
    at_capacity = leases.subscriptions_at_capacity(caps, now=now)
    st = _State(
        agent=agent,
        now=now,
        family=family,
        strategy=system.routing_strategy,
        key=pool.key_rung_state(agent=agent, system=system, now=now),
        at_capacity=at_capacity,
        selection=rank_alternatives(
            agent=agent, exclude_ids=at_capacity, now=now, model=model or None
        ),
        walk=walk_start(
            origin=agent.subscription_id,
            autonomous=autonomous,
            subscription_count=len(rows),
            deadline=now + _NO_BUDGET_LIMIT,
        ),
        stop=pool.switching_stop(agent=agent, system=system),
    )
    st.forecasts = headroom_forecasts_read(row.pk for row in rows)
    snapshots = snapshots_read(row.pk for row in rows)
    readings = snapshots.readings if snapshots.reachable else {}
    breaker_state = breaker.breaker_read(provider=provider, now=now).state

    assigned, evidence = None, None
    if agent.subscription_id is not None:
        evidence = turn_evidence_read(agent.subscription_id)
        assigned = _assigned_line(st, evidence)

    first: Pick | None
    halted: Stop | str | None
    if breaker_state is breaker.BreakerState.OPEN:
        first, pre_dispatch, halted = None, PROVIDER_OUTAGE, PROVIDER_OUTAGE
    else:
        first, pre_dispatch, halted = _first_rung(st, assigned, evidence)
        if first is not None and halted is None:
            first, pre_dispatch = _around_cap(st, first, pre_dispatch)
            if first is None:
                halted = AT_CAPACITY

    picks: list[Pick]
    if first is None:
        picks = []
        walk_stop = str(halted)
    elif halted is not None:
        picks, walk_stop = [first], str(halted)
    elif st.stop is not None:
        picks, walk_stop = [first], st.stop.value
    else:
        picks, stopped = _walk_order(
            st.walk, st.selection, first=first, key_available=st.key.available, now=now
        )
        walk_stop = stopped.value

    candidates = _candidates(st.selection)
    rungs = [
        _rung_line(
            i, p, candidates.get(p.subscription_id or 0), readings.get(p.subscription_id or 0), st
        )
        for i, p in enumerate(picks, 1)
    ]
    walked = first is not None and halted is None and st.stop is None
    return Explanation(
        agent=agent.name,
        at=now,
        model=model,
        family=family,
        routing_policy=agent.routing_policy,
        strategy=st.strategy,
        autonomous=autonomous,
        breaker=breaker_state.value,
        assigned=assigned,
        pre_dispatch=pre_dispatch,
        first=rungs[0] if rungs else None,
        rungs=rungs,
        walk_stop=walk_stop,
        excluded=_excluded(st, rows, picks, readings, walked=walked)
        if walked or halted == Stop.POLICY
        else [],
        key=_key_line(st.key),
        ranking_fallback=st.selection.fallback or None,
    )


def _assigned_line(st: _State, evidence: TurnEvidence) -> AssignedLine:
    agent = st.agent
    assert agent.subscription_id is not None
    refusing = pool.assigned_refusing(evidence, now=st.now, family=st.family)
    forecast = not refusing and pool.assigned_forecast_exhausted(
        evidence, now=st.now, expected_turn=_expected_turn(st.now), family=st.family
    )
    mark = evidence.refusal
    return AssignedLine(
        subscription_id=agent.subscription_id,
        name=agent.subscription.name if agent.subscription is not None else "",
        refusing=refusing,
        decided_by=_decided_by(evidence, refusing, st.family, st.now),
        forecast_exhausted=forecast,
        at_capacity=agent.subscription_id in st.at_capacity,
        policy_refusal=pool.assignment_policy_refusal(agent),
        figures=_figures(st, agent.subscription_id, evidence.reading),
        last_refusal_at=mark.at if mark is not None else None,
        last_refusal_kind=mark.failure_kind if mark is not None else None,
        last_refusal_resets_at=mark.resets_at if mark is not None else None,
        last_refusal_window=(mark.limiting_window or None) if mark is not None else None,
    )


def _candidates(selection: Selection) -> dict[int, Candidate]:
    return {
        **{r.candidate.subscription_id: r.candidate for r in selection.ranked},
        **{c.subscription_id: c for c in selection.last_resort},
        **{c.subscription_id: c for c in selection.dropped},
    }


def _rung_line(
    position: int,
    pick: Pick,
    candidate: Candidate | None,
    reading: Reading | None,
    st: _State,
) -> RungLine:
    sid = pick.subscription_id
    return RungLine(
        position=position,
        kind=pick.kind.value,
        subscription_id=sid,
        name=pick.name,
        why=pick.why.value,
        figures=_figures(st, sid, reading) if sid is not None else Figures(),
        last_refusal_at=candidate.last_failure_at if candidate is not None else None,
        last_refusal_resets_at=candidate.last_failure_resets_at if candidate is not None else None,
        last_refusal_window=candidate.last_failure_window or None
        if candidate is not None
        else None,
    )


def _refused_line(
    candidate: Candidate, figures: Figures, family: str | None, autonomous: bool
) -> ExcludedLine:
    """A skip-listed candidate off the path: why its refusal keeps it out."""
    window = candidate.last_failure_window or None
    if window == THROTTLE:
        reason, detail = Excluded.THROTTLED, "throttled (a 429 without quota evidence): backing off"
    elif window and window not in (FIVE_HOUR, SEVEN_DAY) and refusal_blocks(window, family):
        reason, detail = Excluded.FAMILY_BLOCKED, f"refused for {window}, which this model spends"
    else:
        reason, detail = Excluded.SKIP_LISTED, "refused in the skip window"
        if window:
            detail += f" ({window})"
    if autonomous:
        minutes = int(LAST_RESORT_MIN_AGE_AUTONOMOUS.total_seconds() // 60)
        detail += f"; an autonomous turn waits {minutes} minutes after a refusal"
    return ExcludedLine(
        candidate.subscription_id,
        candidate.name,
        reason,
        detail,
        figures,
        candidate.last_failure_at,
        candidate.last_failure_resets_at,
        window,
    )


def _excluded(
    st: _State,
    rows: list[Subscription],
    picks: list[Pick],
    readings: dict[int, Reading],
    *,
    walked: bool,
) -> list[ExcludedLine]:
    """Every subscription of the provider off the turn's path, with why."""
    selection = st.selection
    on_path = {p.subscription_id for p in picks if p.subscription_id is not None}
    dropped = {c.subscription_id for c in selection.dropped}
    skip_listed = {c.subscription_id: c for c in selection.last_resort}
    ranked = {r.candidate.subscription_id: r for r in selection.ranked}
    lines = []
    for row in rows:
        pk = row.pk
        if pk == st.agent.subscription_id or pk in on_path:
            continue
        figures = _figures(st, pk, readings.get(pk))
        if pk in dropped:
            family_only = figures.limiting_window not in (None, FIVE_HOUR, SEVEN_DAY)
            detail = "a fresh reading says it refuses"
            if figures.limiting_window:
                detail += f" ({figures.limiting_window})"
            reason = Excluded.FAMILY_BLOCKED if family_only else Excluded.REFUSING
            lines.append(ExcludedLine(pk, row.name, reason, detail, figures))
        elif pk in skip_listed:
            lines.append(_refused_line(skip_listed[pk], figures, st.family, st.walk.autonomous))
        elif pk in st.at_capacity:
            detail = f"serving its concurrency cap ({row.max_concurrency})"
            lines.append(ExcludedLine(pk, row.name, Excluded.AT_CAPACITY, detail, figures))
        elif not pool.policy_allows(st.agent, row):
            detail = (
                f"its policy ({st.agent.routing_policy}) allows only plans that refuse past "
                f"their quota; this one's overage: {row.overage}"
            )
            lines.append(ExcludedLine(pk, row.name, Excluded.POLICY, detail, figures))
        elif pk not in ranked:
            detail = "the pool's filter left it out"
            lines.append(ExcludedLine(pk, row.name, Excluded.NOT_OFFERED, detail, figures))
        elif walked:
            # Ranked, yet the walk stopped before it (the rung cap).
            detail = "ranked after the walk's rung cap"
            lines.append(ExcludedLine(pk, row.name, Excluded.NOT_OFFERED, detail, figures))
    return lines


# The human-readable form (the command prints it; the API carries it as ``summary``).

_PRE_DISPATCH_TEXT = {
    "serving": "not known to refuse: the first attempt runs on it",
    "routed": "known not to serve: pre-dispatch routes the first attempt away",
    "forecast": "forecast to run out before the turn ends: the first attempt goes elsewhere",
    "no_alternative": "not a good start, but nothing better is known: it runs as assigned",
    "auto_switch_off": "not a good start, but auto-switch is off: it runs as assigned",
    "pinned": "not a good start, but the agent is pinned: it runs as assigned",
    "policy": "its routing policy forbids it: the turn starts on a plan the policy allows",
    AT_CAPACITY: "serving its concurrency cap: the first attempt goes elsewhere",
    PROVIDER_OUTAGE: "the provider's circuit breaker is open: the turn fails at once",
}
_DECIDED_BY_TEXT = {
    "reading": "a fresh cached reading",
    "refusal": "a refusal in the skip window (no usable reading)",
    "no_evidence": "no usable reading and no refusal in the skip window",
    "unreachable": "the cache did not answer",
}
_WHY_TEXT = {
    Why.ASSIGNED.value: "assigned",
    Why.PRE_DISPATCH.value: "pre-dispatch",
    Why.POLICY.value: "the policy's choice",
    Why.AT_CAPACITY.value: "the assignment is at its cap",
    Why.AFFINITY.value: "the chat session's plan",
    Why.RANKED.value: "ranked",
    Why.READMITTED.value: "readmitted",
    Why.LAST_RESORT.value: "last resort (skip-listed)",
    Why.API_KEY.value: "the key rung",
    Why.CONCURRENT_SWITCH.value: "concurrent switch",
}
_STOP_TEXT = {
    Stop.EXHAUSTED.value: "every candidate tried: the turn fails with the trail",
    Stop.ALREADY_TRIED.value: "every candidate tried: the turn fails with the trail",
    Stop.RUNG_CAP.value: "the rung cap: the turn fails with the trail",
    Stop.NO_SUBSCRIPTION.value: "an agent without a subscription never walks",
    Stop.AUTO_SWITCH_OFF.value: "auto-switch is off: a refusal fails the turn",
    Stop.PINNED.value: "the agent is pinned: a refusal fails the turn",
    Stop.POLICY.value: "no plan its policy allows can serve: the turn is refused",
    AT_CAPACITY: "every plan it may use is at its cap: the turn fails",
    PROVIDER_OUTAGE: "provider outage: the turn fails fast (upstream_error)",
}
_KEY_CLOSED_TEXT = {
    pool.KeyClosed.FALLBACK_OFF.value: "the API-key fallback is off",
    pool.KeyClosed.NO_KEY.value: "no platform API key is configured",
    pool.KeyClosed.POLICY.value: "the agent's subscription-only policy never bills the key",
    pool.KeyClosed.AGENT_OPTED_OUT.value: "the agent may never bill the key",
    pool.KeyClosed.NOT_A_CLAUDE_RUNTIME.value: "the agent's runtime cannot use the key",
    pool.KeyClosed.REFUSED_RECENTLY.value: "the key was refused recently",
    pool.KeyClosed.BUDGET.value: "a key budget is used up",
}


def _instant(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "unknown"
    seconds = int((value - now).total_seconds())
    hours, rest = divmod(abs(seconds), 3600)
    delta = f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m"
    return f"{value:%Y-%m-%d %H:%M}Z ({'in ' + delta if seconds >= 0 else delta + ' ago'})"


def _figures_text(figures: Figures, now: datetime) -> str:
    parts = [f"tier {figures.tier}" if figures.tier else "no reading"]
    if figures.band is not None:
        parts.append(f"band {figures.band}")
    if figures.fullness is not None:
        parts.append(f"{figures.fullness:.0f}% used")
    if figures.score is not None:
        parts.append(f"score {figures.score:.1f}")
    if figures.limiting_window:
        parts.append(f"limited by {figures.limiting_window}")
        parts.append(f"resets {_instant(figures.resets_at, now)}")
    if figures.reading_age_seconds is not None:
        parts.append(f"reading {figures.reading_age_seconds}s old")
    if figures.runs_out_at is not None:
        parts.append(f"forecast to run out {_instant(figures.runs_out_at, now)}")
    return ", ".join(parts)


def explanation_text(explanation: Explanation) -> list[str]:
    """The explanation as lines for a terminal (never a secret: none is held)."""
    e, now = explanation, explanation.at
    trigger = "an autonomous" if e.autonomous else "an interactive"
    lines = [
        f"Agent {e.agent}: model {e.model or '(default)'}, policy {e.routing_policy}, "
        f"ranking {e.strategy}; {trigger} turn at {now:%Y-%m-%d %H:%M:%S}Z",
    ]
    if e.breaker == breaker.BreakerState.HALF_OPEN.value:
        lines.append("Provider breaker: half-open (one trial turn at a time is sent)")
    elif e.breaker != breaker.BreakerState.CLOSED.value:
        lines.append(f"Provider breaker: {e.breaker}")
    if e.assigned is None:
        lines.append("Assigned: none (it runs on what it boots with and never walks)")
    else:
        a = e.assigned
        lines.append(
            f"Assigned: {a.name}: {_PRE_DISPATCH_TEXT.get(e.pre_dispatch, e.pre_dispatch)}"
        )
        lines.append(f"  evidence: {_DECIDED_BY_TEXT.get(a.decided_by, a.decided_by)}")
        if a.policy_refusal:
            lines.append(f"  policy: {a.policy_refusal}")
        if a.forecast_exhausted:
            lines.append("  forecast: runs out before a turn starting now would end")
        if a.at_capacity:
            lines.append("  serving its concurrency cap")
        lines.append(f"  {_figures_text(a.figures, now)}")
        if a.last_refusal_at is not None:
            lines.append(
                f"  last refusal {_instant(a.last_refusal_at, now)} ({a.last_refusal_kind}), "
                f"its reset {_instant(a.last_refusal_resets_at, now)}"
            )
    if e.first is None:
        lines.append(
            f"Next turn: refused before any attempt ({_STOP_TEXT.get(e.walk_stop, e.walk_stop)})"
        )
    else:
        lines.append(
            f"Next turn runs on: {e.first.name} ({_WHY_TEXT.get(e.first.why, e.first.why)})"
        )
    lines.append("Order if each refuses:")
    for rung in e.rungs:
        text = f"  {rung.position}. {rung.name} [{_WHY_TEXT.get(rung.why, rung.why)}]"
        if rung.kind == RungKind.SUBSCRIPTION.value:
            text += f": {_figures_text(rung.figures, now)}"
        if rung.last_refusal_at is not None:
            text += (
                f"; refused {_instant(rung.last_refusal_at, now)}, "
                f"its reset {_instant(rung.last_refusal_resets_at, now)}"
            )
        lines.append(text)
    lines.append(f"  then: {_STOP_TEXT.get(e.walk_stop, e.walk_stop)}")
    if e.excluded:
        lines.append("Excluded:")
        for line in e.excluded:
            text = f"  {line.name}: {line.reason}: {line.detail}"
            if line.figures.resets_at is not None:
                text += f"; resets {_instant(line.figures.resets_at, now)}"
            if line.last_refusal_at is not None:
                text += (
                    f"; refused {_instant(line.last_refusal_at, now)}, "
                    f"its reset {_instant(line.last_refusal_resets_at, now)}"
                )
            lines.append(text)
    key = e.key
    if key.available:
        lines.append("Key rung: available")
    else:
        text = f"Key rung: closed: {_KEY_CLOSED_TEXT.get(key.closed or '', key.closed)}"
        if key.detail:
            text += f" ({key.detail}; reopens {_instant(key.reopens_at, now)})"
        if key.refused_at is not None:
            text += (
                f" ({key.failure_kind} {_instant(key.refused_at, now)}; "
                f"reopens {_instant(key.reopens_at, now)})"
            )
        lines.append(text)
    if e.ranking_fallback:
        lines.append(f"Ranking: database order ({e.ranking_fallback}): the cache did not rank")
    return lines
