"""Where an agent's next turn would run, and why: the routing explainer.

The explainer is the planner (``routing/planner``) run on fresh evidence with
no side effects. It starts the turn as the executor would (never saved), answers each
``Need`` with the executor's own gatherers read-only (``execution.gathering.evidence_read``:
the breaker read, never the trial claim; the agent's row, never its start), and takes
every ``Send`` to refuse on quota (a full cap refuses the lease, a closed key budget the
reservation: both read, never taken). The rungs it sends on, in order, are the turn's
order if every rung before refused; the planner's ``Park`` or ``Fail`` ends it. A chat
session's affinity is the planner's (``session_id``), and so is parking: an exhausted
autonomous turn is driven as well, to say whether it would park and until when.

It decides nothing itself: the labels (figures, why a candidate is excluded) describe
what the planner was given. It reads only the database and the cache; it never
probes a provider, never takes a lease or a claim, and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from agents.models import Agent
from agents.week_plan_store import planned_read
from execution.deadlines import DEADLINE_SLACK
from execution.gathering import at_capacity_ids, evidence_read
from execution.models import Execution, Trigger
from execution.turn import MAX_STEPS
from execution.turn_state import TurnState, turn_state_start
from routing.eligibility import FORBIDDEN, Admitted, Candidate, Excluded, Reason
from routing.headroom.alternatives import Selection
from routing.headroom.balance import balance_of
from routing.headroom.classification import Headroom, Tier, classify_headroom
from routing.headroom.exhaustion_forecast import Forecast, earliest_exhaustion
from routing.headroom.ranking import BALANCED
from routing.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading
from routing.headroom.recovery import earliest_known_reset
from routing.headroom.windows import turn_windows
from routing.planner import (
    Ask,
    Attempt,
    BudgetRefused,
    Busy,
    Event,
    Evidence,
    Fail,
    Need,
    Outcome,
    Park,
    Record,
    Send,
    plan,
)
from routing.rung import RungKind
from routing.walk import Stop, Why
from subscriptions import breaker
from subscriptions.headroom.forecast_store import headroom_forecasts_read
from subscriptions.headroom.store import snapshots_read, turn_evidence_read
from subscriptions.key_refusals import key_reopens_at
from subscriptions.key_rung_state import KeyRungState, key_rung_state
from subscriptions.models import Subscription
from subscriptions.plan_facts import fresh_for

# What every simulated attempt answers: a quota refusal (the walk's order is what it
# would do if every rung before refused).
QUOTA = Outcome(ok=False, error_code="rate_limit", detail="You've hit your limit")
# Where the turn stops before any attempt (no walk happens).
PROVIDER_OUTAGE = Stop.PROVIDER_OUTAGE.value
AT_CAPACITY = Stop.AT_CAPACITY.value


# Why an admitted plan is still off the turn's path: the walk stopped before it (its
# rung cap). Every other exclusion is ``admit``'s reason (``routing.eligibility.Reason``).
NOT_OFFERED = "not_offered"


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
    ``excluded`` is ``admit``'s reason when it may not serve (``paused``, ``policy``,
    ``refusing``, ``throttled``; "" when it may), ``detail`` its words;
    ``policy_refusal`` is why the agent's policy forbids it ("" when it may run there).
    """

    subscription_id: int
    name: str
    refusing: bool
    decided_by: str
    excluded: str = ""
    detail: str = ""
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
    # The last 4 of the key whose refusal closed the rung.
    fingerprint: str = ""


@dataclass(frozen=True)
class Explanation:
    """Where the next turn of ``agent`` would run and why, at ``at``.

    ``first`` is the rung the first attempt runs on (None: the turn is refused
    before any attempt, see ``walk_stop``); ``pre_dispatch`` says why it is that one
    (``serving``, ``routed``, ``forecast``, ``no_alternative``, ``auto_switch_off``,
    ``pinned``, ``no_assignment``, ``policy``, ``at_capacity``, ``provider_outage``);
    ``rungs`` the order the turn would try if each refused, ending for
    ``walk_stop``; ``ends`` how this turn ends then (``park`` or ``fail``);
    ``parks_until`` when an exhausted autonomous turn would park until (None: it
    fails); ``excluded`` the provider's subscriptions the planner ranked off that path
    and why (empty when it never ranked). ``pre_dispatch`` is ``affinity`` when a
    chat session's previous plan starts the turn.
    """

    agent: str
    at: datetime
    model: str
    family: str | None
    routing_policy: str
    strategy: str
    autonomous: bool
    session_id: str
    breaker: str
    assigned: AssignedLine | None
    pre_dispatch: str
    first: RungLine | None
    rungs: list[RungLine]
    walk_stop: str
    ends: str
    parks_until: datetime | None
    excluded: list[ExcludedLine]
    key: KeyLine
    ranking_fallback: str | None
    # The week plan's line for this agent ("planned for max-b until Thu 09:00 UTC,
    # because …") while its entry is current; None without one (a stale or missing
    # plan: the turn follows today's rules).
    planned: str | None = None

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


def _key_line(state: KeyRungState) -> KeyLine:
    reopens = None
    if state.refused_at is not None:
        reopens = key_reopens_at(failure_kind=state.failure_kind, refused_at=state.refused_at)
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
        fingerprint=state.fingerprint,
    )


@dataclass
class _State:
    """What the labels of one explanation read (the planner decided; these describe)."""

    agent: Agent
    now: datetime
    family: str | None
    strategy: str
    autonomous: bool
    at_capacity: set[int]
    forecasts: dict[int, Forecast] = field(default_factory=dict)


@dataclass
class Drive:
    """One run of the planner on read-only evidence, every rung refusing."""

    evidence: Evidence
    # What was sent (a lease or key budget refused is not), in order.
    sends: list[Send] = field(default_factory=list)
    end: Park | Fail | None = None
    # The first ranking the planner asked for (the candidates it chose among).
    selection: Selection | None = None


# The explainer's evidence source: the answer to a ``Need``, and what sending gives.
Answer = Callable[[Evidence, Need], Evidence]
Refuse = Callable[[Evidence, Send], Event]


def explain_drive(evidence: Evidence, *, answer: Answer, refuse: Refuse, now: datetime) -> Drive:
    """Ask the planner until it ends the turn: ``answer`` each ``Need``, ``refuse`` each
    ``Send``, a ``Record`` writes nothing. The executor's loop (``execution.turn``) with
    the side effects taken out; pure given its two sources."""
    drive = Drive(evidence)
    for _ in range(MAX_STEPS):
        action = plan(drive.evidence, now=now)
        if isinstance(action, Need):
            drive.evidence = answer(drive.evidence, action)
            if action.ask is Ask.SELECTION and drive.selection is None:
                drive.selection = drive.evidence.facts.selection
        elif isinstance(action, Send):
            event = refuse(drive.evidence, action)
            if isinstance(event, Attempt):
                drive.sends.append(action)
            drive.evidence = drive.evidence.after(event)
        elif isinstance(action, Record):
            drive.evidence = drive.evidence.learn(recorded=True)
        elif isinstance(action, Park | Fail):
            drive.end = action
            return drive
        else:
            return drive  # a refusal never serves
    raise RuntimeError("the planner did not end the explained turn")


def _drive(state: TurnState, *, now: datetime) -> Drive:
    """The planner on ``state``'s turn, gathering read-only (``evidence_read``)."""

    def answer(evidence: Evidence, need: Need) -> Evidence:
        state.evidence = evidence
        evidence_read(state, need, now)
        return state.evidence

    def refuse(evidence: Evidence, send: Send) -> Event:
        state.evidence = evidence
        return _simulated(state, send, now)

    drive = explain_drive(state.evidence, answer=answer, refuse=refuse, now=now)
    state.evidence = drive.evidence
    return drive


def _explained_turn(
    agent: Agent, *, now: datetime, autonomous: bool, model: str, session_id: str
) -> TurnState:
    """The turn being explained, as the executor would start it, never saved: a turn of
    the default budget (the forecasts' expected length), created ``now``."""
    budget = timedelta(seconds=settings.TRINITY_TURN_TIMEOUT_SECONDS)
    execution = Execution(
        agent=agent,
        agent_name=agent.name,
        trigger=Trigger.SCHEDULE if autonomous else Trigger.API,
        session_id=session_id,
        model=model,
        created_at=now,
        deadline=now + budget + DEADLINE_SLACK,
    )
    return turn_state_start(execution, agent)


def _simulated(state: TurnState, action: Send, now: datetime) -> Event:
    """What applying ``action`` is taken to give: a full cap refuses the lease (read,
    never taken), a closed key budget the reservation (read, never reserved), else
    the rung refuses on quota (the order is the walk's if every rung before refused)."""
    rung = action.rung
    if rung is not None and rung.kind is RungKind.SUBSCRIPTION:
        if rung.subscription_id in at_capacity_ids(state, now):
            return Busy(rung, action.why, retry=action.retry)
    key = state.evidence.facts.key
    if rung is not None and rung.kind is RungKind.API_KEY and key and key.budget is not None:
        return BudgetRefused(key.budget, retry=action.retry)
    return Attempt(sent=rung, ran_on=rung, why=action.why, outcome=QUOTA, retry=action.retry)


def routing_explain(
    *,
    agent: Agent,
    now: datetime,
    autonomous: bool = False,
    model: str = "",
    session_id: str = "",
) -> Explanation:
    """Where ``agent``'s next turn would run at ``now`` and why, without running it: the
    planner, asked on evidence gathered read-only (``execution.gathering.evidence_read``).

    ``autonomous`` explains a schedule/agent/mcp turn; ``model`` a turn on that model,
    else the agent's; ``session_id`` a chat turn of that session (its previous plan's
    affinity). Reads the database and the cache only; never probes, never writes,
    never holds a secret in what it returns.
    """
    model = model or agent.model
    state = _explained_turn(
        agent, now=now, autonomous=autonomous, model=model, session_id=session_id
    )
    drive = _drive(state, now=now)
    system = state.settings()
    rows = list(Subscription.objects.filter(provider=agent.provider).order_by("name"))
    st = _State(
        agent=agent,
        now=now,
        family=state.evidence.turn.family,
        strategy=system.routing_strategy,
        autonomous=autonomous,
        at_capacity=at_capacity_ids(state, now),
        forecasts=headroom_forecasts_read(row.pk for row in rows),
    )
    parks = (
        drive
        if autonomous
        else _drive(
            _explained_turn(agent, now=now, autonomous=True, model=model, session_id=session_id),
            now=now,
        )
    )
    return _explanation(st, state, drive, rows, parks=parks, model=model, session_id=session_id)


def _sent(drive: Drive) -> list[Send]:
    """The rungs in the order the turn tries them: a retry is the same rung again, and
    a turn sent with no rung runs on what its agent booted with (no assignment)."""
    return [send for send in drive.sends if not send.retry and send.rung is not None]


def _explanation(
    st: _State,
    state: TurnState,
    drive: Drive,
    rows: list[Subscription],
    *,
    parks: Drive,
    model: str,
    session_id: str,
) -> Explanation:
    now = st.now
    snapshots = snapshots_read(row.pk for row in rows)
    readings = snapshots.readings if snapshots.reachable else {}
    assigned = _assigned_line(st, state) if st.agent.subscription_id is not None else None
    sends = _sent(drive)
    selection = drive.selection
    candidates = _candidates(selection) if selection is not None else {}
    rungs = [
        _rung_line(i, s, candidates.get(_sid(s)), readings.get(_sid(s)), st)
        for i, s in enumerate(sends, 1)
    ]
    end = drive.end
    park = parks.end if isinstance(parks.end, Park) else None
    return Explanation(
        agent=st.agent.name,
        at=now,
        model=model,
        family=st.family,
        routing_policy=st.agent.routing_policy,
        strategy=st.strategy,
        autonomous=st.autonomous,
        session_id=session_id,
        breaker=breaker.breaker_read(provider=st.agent.provider, now=now).state.value,
        assigned=assigned,
        pre_dispatch=_pre_dispatch(drive, assigned),
        first=rungs[0] if rungs else None,
        rungs=rungs,
        walk_stop=_walk_stop(drive),
        ends="park" if isinstance(end, Park) else "fail",
        parks_until=park.until if park is not None else None,
        excluded=_excluded(st, selection, rows, sends, readings) if selection else [],
        key=_key_line(key_rung_state(agent=st.agent, system=state.settings(), now=now)),
        ranking_fallback=(selection.fallback or None) if selection is not None else None,
        planned=_planned_text(st.agent, now),
    )


def _planned_text(agent: Agent, now: datetime) -> str | None:
    entry = planned_read(agent.pk)
    return entry.text() if entry is not None and entry.current(now) else None


def _sid(send: Send) -> int:
    return send.rung.subscription_id or 0 if send.rung is not None else 0


def _walk_stop(drive: Drive) -> str:
    """Why the walk stops, or why nothing is sent (the planner's ``walk_stop``)."""
    end = drive.end
    if end is None:
        return ""
    return end.walk_stop or (end.error_code if isinstance(end, Fail) else "")


def _pre_dispatch(drive: Drive, assigned: AssignedLine | None) -> str:
    """Why the first attempt runs where it does: a label of the planner's first action."""
    sends = _sent(drive)
    if not sends:
        stop = _walk_stop(drive)
        if stop in (PROVIDER_OUTAGE, AT_CAPACITY, *FORBIDDEN):
            return stop  # e.g. "paused": nothing else could take the turn
        return "no_assignment"
    first = sends[0]
    if first.why is Why.POLICY:
        return "policy"
    if first.why is Why.AFFINITY:
        return "affinity"
    if first.why is Why.AT_CAPACITY:
        return AT_CAPACITY
    if first.why is Why.PLACEMENT:
        return "placement"
    if assigned is None:
        return "no_assignment"
    if first.why in (Why.PRE_DISPATCH, Why.API_KEY):
        if assigned.excluded and not assigned.refusing:
            return assigned.excluded  # a rule keeps the turn off it: "paused"
        return "routed" if assigned.refusing else "forecast"
    if not assigned.excluded and not assigned.forecast_exhausted:
        return "serving"
    found = drive.evidence.settings
    switching = found.switching_stop if found is not None else None
    return switching.value if switching is not None else "no_alternative"


def _assigned_line(st: _State, state: TurnState) -> AssignedLine:
    """The assignment and the verdict the planner went by (gathered if it did not ask)."""
    agent = st.agent
    assert agent.subscription_id is not None  # noqa: S101 - only asked with an assignment
    if state.evidence.agent is None:  # the turn ended before readiness (the breaker)
        evidence_read(state, Need(Ask.READY), st.now)
    if state.evidence.assigned is None:
        evidence_read(state, Need(Ask.ASSIGNED), st.now)
    verdict = state.evidence.assigned
    assert verdict is not None  # noqa: S101 - just gathered
    evidence = turn_evidence_read(agent.subscription_id)
    mark = evidence.refusal
    excluded = verdict if isinstance(verdict, Excluded) else None
    return AssignedLine(
        subscription_id=agent.subscription_id,
        name=agent.subscription.name if agent.subscription is not None else "",
        refusing=excluded is not None and excluded.not_serving,
        decided_by=verdict.decided_by,
        excluded=excluded.reason.value if excluded is not None else "",
        detail=excluded.detail if excluded is not None else "",
        forecast_exhausted=isinstance(verdict, Admitted) and verdict.forecast_out,
        at_capacity=agent.subscription_id in st.at_capacity,
        policy_refusal=excluded.detail
        if excluded is not None and excluded.reason is Reason.POLICY
        else "",
        figures=_figures(st, agent.subscription_id, evidence.reading),
        last_refusal_at=mark.at if mark is not None else None,
        last_refusal_kind=mark.failure_kind if mark is not None else None,
        last_refusal_resets_at=mark.resets_at if mark is not None else None,
        last_refusal_window=(mark.limiting_window or None) if mark is not None else None,
    )


def _candidates(selection: Selection) -> dict[int, Candidate]:
    return {
        **{r.candidate.subscription_id: r.candidate for r in selection.ranked},
        **{j.candidate.subscription_id: j.candidate for j in selection.excluded},
    }


def _rung_line(
    position: int,
    send: Send,
    candidate: Candidate | None,
    reading: Reading | None,
    st: _State,
) -> RungLine:
    rung = send.rung
    sid = rung.subscription_id if rung is not None else None
    return RungLine(
        position=position,
        kind=rung.kind.value if rung is not None else RungKind.SUBSCRIPTION.value,
        subscription_id=sid,
        name=rung.name if rung is not None else "its own credential",
        why=send.why.value,
        figures=_figures(st, sid, reading) if sid is not None else Figures(),
        last_refusal_at=candidate.last_failure_at if candidate is not None else None,
        last_refusal_resets_at=candidate.last_failure_resets_at if candidate is not None else None,
        last_refusal_window=candidate.last_failure_window or None
        if candidate is not None
        else None,
    )


def _excluded(
    st: _State,
    selection: Selection,
    rows: list[Subscription],
    sends: list[Send],
    readings: dict[int, Reading],
) -> list[ExcludedLine]:
    """Every subscription of the provider off the turn's path, with ``admit``'s reason
    (the planner ranked: ``selection`` carries each plan's verdict). A label, never a
    decision: an admitted plan off the path is one the walk's rung cap stopped before."""
    on_path = {_sid(send) for send in sends}
    judged = {j.candidate.subscription_id: j for j in selection.excluded}
    lines = []
    for row in rows:
        pk = row.pk
        if pk == st.agent.subscription_id or pk in on_path:
            continue
        figures = _figures(st, pk, readings.get(pk))
        found = judged.get(pk)
        if found is None:
            detail = "ranked after the walk's rung cap"
            lines.append(ExcludedLine(pk, row.name, NOT_OFFERED, detail, figures))
            continue
        candidate, verdict = found
        lines.append(
            ExcludedLine(
                pk,
                row.name,
                verdict.reason.value,
                verdict.detail,
                figures,
                candidate.last_failure_at,
                candidate.last_failure_resets_at,
                candidate.last_failure_window or None,
            )
        )
    return lines
