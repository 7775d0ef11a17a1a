"""Where an agent's next turn would run, and why: the routing explainer.

It asks the questions the turn asks, through the turn's own code: the pre-dispatch
check (``pool.assigned_refusing`` on ``store.turn_evidence_read``, then
``walk.pre_dispatch_pick``), the ranking (``rank_alternatives``), the key rung's
gates (``pool.key_rung_state``), the switching gate (``pool.switching_stop``) and,
for the order after a refusal, the walk itself (``walk.walk_next``, fed the same
selection minus what it already tried). It reads only the database and the cached
snapshots; it never probes a provider and writes nothing.

What it cannot know: whether the assigned plan will refuse this particular turn.
The order it gives is the walk's order if every rung before it refuses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from agents import lifecycle
from agents.models import Agent
from agents.rung import PLATFORM_KEY_LABEL, RungKind
from subscriptions import pool
from subscriptions.classifier import classify_refusal
from subscriptions.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading
from subscriptions.headroom.rules import (
    Candidate,
    Headroom,
    Selection,
    Tier,
    classify_headroom,
    earliest_known_reset,
    family_window,
    reading_says_limited,
)
from subscriptions.headroom.selection import fresh_for, rank_alternatives
from subscriptions.headroom.store import snapshots_read, turn_evidence_read
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


class Excluded:
    """Why a subscription of the agent's provider is not on the walk's path."""

    REFUSING = "refusing"  # a fresh reading says it refuses: never tried
    SKIP_LISTED = "skip_listed"  # refused in the skip window; autonomous turns wait 30 min
    NOT_OFFERED = "not_offered"  # the pool's filter left it out


@dataclass(frozen=True)
class Figures:
    """What the cached reading says of one subscription for this agent's model."""

    tier: str | None = None
    band: int | None = None
    fullness: float | None = None
    five_hour: float | None = None
    seven_day: float | None = None
    limiting_window: str | None = None
    resets_at: datetime | None = None
    reading_age_seconds: int | None = None


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


@dataclass(frozen=True)
class ExcludedLine:
    subscription_id: int
    name: str
    reason: str
    detail: str
    figures: Figures = field(default_factory=Figures)
    last_refusal_at: datetime | None = None
    last_refusal_resets_at: datetime | None = None


@dataclass(frozen=True)
class AssignedLine:
    """The assigned plan, and whether the pre-dispatch check would route away from it.

    ``decided_by``: ``reading`` (a usable cached reading decided), ``refusal`` (a
    refusal in the skip window did, without a usable reading), ``no_evidence``, or
    ``unreachable`` (the cache did not answer: the turn dispatches as assigned).
    """

    subscription_id: int
    name: str
    refusing: bool
    decided_by: str
    figures: Figures = field(default_factory=Figures)
    last_refusal_at: datetime | None = None
    last_refusal_kind: str | None = None
    last_refusal_resets_at: datetime | None = None


@dataclass(frozen=True)
class KeyLine:
    available: bool
    closed: str | None = None
    refused_at: datetime | None = None
    failure_kind: str | None = None
    reopens_at: datetime | None = None


@dataclass(frozen=True)
class Explanation:
    """Where the next turn of ``agent`` would run and why, at ``at``.

    ``first`` is the rung the first attempt runs on (None: no credential at all);
    ``pre_dispatch`` says why it is that one (``serving``, ``routed``,
    ``no_alternative``, ``auto_switch_off``, ``pinned``, ``no_assignment``);
    ``rungs`` the order the turn would try if each refused, ending for
    ``walk_stop``; ``excluded`` the provider's subscriptions off that path and why.
    """

    agent: str
    at: datetime
    model: str
    family: str | None
    routing_policy: str
    autonomous: bool
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
    """The window that limits the subscription for this turn, and its reset.

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


def _figures(reading: Reading | None, family: str | None, now: datetime) -> Figures:
    headroom = classify_headroom(reading, now=now, max_age=fresh_for(), family=family)
    window, resets_at = _limiting(reading, headroom, family, now)
    age = headroom.age_seconds(now)
    return Figures(
        tier=headroom.tier.value,
        band=headroom.band,
        fullness=headroom.fullness,
        five_hour=headroom.five_hour,
        seven_day=headroom.seven_day,
        limiting_window=window,
        resets_at=resets_at,
        reading_age_seconds=int(age) if age is not None else None,
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


def _walk_order(
    walk: Walk, selection: Selection, *, first: Pick | None, key_available: bool, now: datetime
) -> tuple[list[Pick], Stop]:
    """The picks ``walk_next`` makes if every rung refuses, and why it stops."""
    picks: list[Pick] = []
    if first is not None:
        picks.append(first)
        walk.record(
            kind=first.kind,
            subscription_id=first.subscription_id,
            name=first.name,
            why=first.why,
            served=False,
        )
    while True:
        tried = set(walk.tried)
        step = walk_next(
            walk,
            refusal=_QUOTA_REFUSAL,
            selection=_without(selection, tried),
            key_available=key_available,
            now=now,
        )
        if not isinstance(step, Pick):
            return picks, step
        picks.append(step)
        walk.record(
            kind=step.kind,
            subscription_id=step.subscription_id,
            name=step.name,
            why=step.why,
            served=False,
        )


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
    return KeyLine(
        available=state.available,
        closed=state.closed.value if state.closed is not None else None,
        refused_at=state.refused_at,
        failure_kind=state.failure_kind,
        reopens_at=reopens,
    )


def _assigned_line(agent: Agent, family: str | None, now: datetime) -> AssignedLine:
    assert agent.subscription_id is not None
    evidence = turn_evidence_read(agent.subscription_id)
    refusing = pool.assigned_refusing(evidence, now=now)
    mark = evidence.refusal
    if not evidence.reachable:
        decided_by = "unreachable"
    elif (
        reading_says_limited(
            evidence.reading,
            now=now,
            max_age=fresh_for(),
            last_refusal_at=mark.at if mark is not None else None,
        )
        is not None
    ):
        decided_by = "reading"
    else:
        decided_by = "refusal" if refusing else "no_evidence"
    name = agent.subscription.name if agent.subscription is not None else ""
    return AssignedLine(
        subscription_id=agent.subscription_id,
        name=name,
        refusing=refusing,
        decided_by=decided_by,
        figures=_figures(evidence.reading, family, now),
        last_refusal_at=mark.at if mark is not None else None,
        last_refusal_kind=mark.failure_kind if mark is not None else None,
        last_refusal_resets_at=mark.resets_at if mark is not None else None,
    )


def routing_explain(*, agent: Agent, now: datetime, autonomous: bool = False) -> Explanation:
    """Where ``agent``'s next turn would run at ``now`` and why, without running it.

    ``autonomous`` explains a schedule/agent/mcp turn (the last resort waits 30
    minutes after a refusal for those). Reads the database and the cache only; never
    probes, never writes, never holds a secret in what it returns.
    """
    system = system_settings_get()
    family = family_window(agent.model)
    key_state = pool.key_rung_state(agent=agent, system=system, now=now)
    selection = rank_alternatives(agent=agent, now=now)
    subscriptions = list(
        Subscription.objects.filter(provider=agent.provider).values_list("pk", "name")
    )
    snapshots = snapshots_read(pk for pk, _ in subscriptions)
    readings = snapshots.readings if snapshots.reachable else {}

    assigned: AssignedLine | None = None
    stop = pool.switching_stop(agent=agent, system=system)
    walk = walk_start(
        origin=agent.subscription_id,
        autonomous=autonomous,
        subscription_count=len(subscriptions),
        deadline=now + _NO_BUDGET_LIMIT,
    )
    first: Pick | None
    if agent.subscription_id is None:
        # An agent without a plan runs on what it boots with and never walks.
        baseline = lifecycle.baseline_rung(agent)
        first = (
            Pick(RungKind.API_KEY, None, PLATFORM_KEY_LABEL, Why.ASSIGNED)
            if baseline is not None
            else None
        )
        pre_dispatch = "no_assignment"
    else:
        assigned = _assigned_line(agent, family, now)
        first = Pick(RungKind.SUBSCRIPTION, assigned.subscription_id, assigned.name, Why.ASSIGNED)
        pre_dispatch = "serving"
        if assigned.refusing:
            if stop is not None:
                pre_dispatch = stop.value
            else:
                routed = pre_dispatch_pick(
                    walk, selection=selection, key_available=key_state.available, now=now
                )
                if routed is None:
                    pre_dispatch = "no_alternative"
                else:
                    # The turn records the routed rung as PRE_DISPATCH (API_KEY for the key).
                    why = Why.API_KEY if routed.kind is RungKind.API_KEY else Why.PRE_DISPATCH
                    first = routed._replace(why=why)
                    pre_dispatch = "routed"

    if agent.subscription_id is None:
        picks, walk_stop = ([first] if first is not None else []), Stop.NO_SUBSCRIPTION
    elif stop is not None:
        picks, walk_stop = [first] if first is not None else [], stop
    else:
        picks, walk_stop = _walk_order(
            walk, selection, first=first, key_available=key_state.available, now=now
        )

    candidates = {
        **{r.candidate.subscription_id: r.candidate for r in selection.ranked},
        **{c.subscription_id: c for c in selection.last_resort},
        **{c.subscription_id: c for c in selection.dropped},
    }
    rungs = [_rung_line(i, p, candidates, readings, family, now) for i, p in enumerate(picks, 1)]
    on_path = {p.subscription_id for p in picks if p.subscription_id is not None}
    excluded = _excluded(
        subscriptions,
        selection,
        on_path=on_path,
        assigned_id=agent.subscription_id,
        walked=walk_stop not in (Stop.PINNED, Stop.AUTO_SWITCH_OFF, Stop.NO_SUBSCRIPTION),
        autonomous=autonomous,
        readings=readings,
        family=family,
        now=now,
    )
    return Explanation(
        agent=agent.name,
        at=now,
        model=agent.model,
        family=family,
        routing_policy=agent.routing_policy,
        autonomous=autonomous,
        assigned=assigned,
        pre_dispatch=pre_dispatch,
        first=rungs[0] if rungs else None,
        rungs=rungs,
        walk_stop=walk_stop.value,
        excluded=excluded,
        key=_key_line(key_state),
        ranking_fallback=selection.fallback or None,
    )


def _rung_line(
    position: int,
    pick: Pick,
    candidates: dict[int, Candidate],
    readings: dict[int, Reading],
    family: str | None,
    now: datetime,
) -> RungLine:
    sid = pick.subscription_id
    candidate = candidates.get(sid) if sid is not None else None
    return RungLine(
        position=position,
        kind=pick.kind.value,
        subscription_id=sid,
        name=pick.name,
        why=pick.why.value,
        figures=_figures(readings.get(sid), family, now) if sid is not None else Figures(),
        last_refusal_at=candidate.last_failure_at if candidate is not None else None,
        last_refusal_resets_at=candidate.last_failure_resets_at if candidate is not None else None,
    )


def _excluded(
    subscriptions: list[tuple[int, str]],
    selection: Selection,
    *,
    on_path: set[int],
    assigned_id: int | None,
    walked: bool,
    autonomous: bool,
    readings: dict[int, Reading],
    family: str | None,
    now: datetime,
) -> list[ExcludedLine]:
    """Every subscription of the provider off the turn's path, with why.

    Empty when the turn never walks (no assignment, pinned, auto-switch off): then
    nothing is excluded, the walk simply does not happen.
    """
    if not walked:
        return []
    dropped = {c.subscription_id for c in selection.dropped}
    skip_listed = {c.subscription_id: c for c in selection.last_resort}
    offered = {r.candidate.subscription_id for r in selection.ranked} | set(skip_listed) | dropped
    lines = []
    for pk, name in subscriptions:
        if pk == assigned_id or pk in on_path:
            continue
        figures = _figures(readings.get(pk), family, now)
        if pk in dropped:
            detail = "a fresh reading says it refuses"
            if figures.limiting_window:
                detail += f" ({figures.limiting_window})"
            lines.append(ExcludedLine(pk, name, Excluded.REFUSING, detail, figures))
        elif pk in skip_listed:
            candidate = skip_listed[pk]
            detail = "refused in the skip window"
            if autonomous:
                detail += (
                    f"; an autonomous turn waits {LAST_RESORT_MIN_AGE_AUTONOMOUS} after a refusal"
                )
            lines.append(
                ExcludedLine(
                    pk,
                    name,
                    Excluded.SKIP_LISTED,
                    detail,
                    figures,
                    candidate.last_failure_at,
                    candidate.last_failure_resets_at,
                )
            )
        elif pk not in offered:
            lines.append(
                ExcludedLine(
                    pk, name, Excluded.NOT_OFFERED, "the pool's filter left it out", figures
                )
            )
    return lines


# The human-readable form (the command prints it; the API carries it as ``summary``).

_PRE_DISPATCH_TEXT = {
    "serving": "not known to refuse: the first attempt runs on it",
    "routed": "known not to serve: pre-dispatch routes the first attempt away",
    "no_alternative": "known not to serve, but nothing better is known: it runs as assigned",
    "auto_switch_off": "known not to serve, but auto-switch is off: it runs as assigned",
    "pinned": "known not to serve, but the agent is pinned: it runs as assigned",
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
}
_KEY_CLOSED_TEXT = {
    pool.KeyClosed.FALLBACK_OFF.value: "the API-key fallback is off",
    pool.KeyClosed.NO_KEY.value: "no platform API key is configured",
    pool.KeyClosed.POLICY.value: "the agent's subscription-only policy never bills the key",
    pool.KeyClosed.AGENT_OPTED_OUT.value: "the agent may never bill the key",
    pool.KeyClosed.NOT_A_CLAUDE_RUNTIME.value: "the agent's runtime cannot use the key",
    pool.KeyClosed.REFUSED_RECENTLY.value: "the key was refused recently",
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
    if figures.limiting_window:
        parts.append(f"limited by {figures.limiting_window}")
        parts.append(f"resets {_instant(figures.resets_at, now)}")
    if figures.reading_age_seconds is not None:
        parts.append(f"reading {figures.reading_age_seconds}s old")
    return ", ".join(parts)


def explanation_text(explanation: Explanation) -> list[str]:
    """The explanation as lines for a terminal (never a secret: none is held)."""
    e, now = explanation, explanation.at
    trigger = "an autonomous" if e.autonomous else "an interactive"
    lines = [
        f"Agent {e.agent}: model {e.model or '(default)'}, policy {e.routing_policy}; "
        f"{trigger} turn at {now:%Y-%m-%d %H:%M:%S}Z",
    ]
    if e.assigned is None:
        lines.append("Assigned: none (it runs on what it boots with and never walks)")
    else:
        a = e.assigned
        lines.append(
            f"Assigned: {a.name}: {_PRE_DISPATCH_TEXT.get(e.pre_dispatch, e.pre_dispatch)}"
        )
        lines.append(f"  evidence: {_DECIDED_BY_TEXT.get(a.decided_by, a.decided_by)}")
        lines.append(f"  {_figures_text(a.figures, now)}")
        if a.last_refusal_at is not None:
            lines.append(
                f"  last refusal {_instant(a.last_refusal_at, now)} ({a.last_refusal_kind}), "
                f"its reset {_instant(a.last_refusal_resets_at, now)}"
            )
    if e.first is None:
        lines.append("Next turn: no credential at all (no plan, and the key is closed to it)")
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
        if key.refused_at is not None:
            text += (
                f" ({key.failure_kind} {_instant(key.refused_at, now)}; "
                f"reopens {_instant(key.reopens_at, now)})"
            )
        lines.append(text)
    if e.ranking_fallback:
        lines.append(f"Ranking: database order ({e.ranking_fallback}): the cache did not rank")
    return lines
