"""The routing explanation as lines for a terminal: ``manage.py routing_explain``
prints them, ``GET /api/agents/{name}/routing`` carries them as ``summary``. Labels
only; never a secret (none is held)."""

from __future__ import annotations

from datetime import datetime

from execution.explain.explanation import AT_CAPACITY, PROVIDER_OUTAGE, Explanation, Figures
from routing.rung import RungKind
from routing.walk import Stop, Why
from subscriptions import breaker
from subscriptions.key_rung_state import KeyClosed

# The human-readable form (the command prints it; the API carries it as ``summary``).

_PRE_DISPATCH_TEXT = {
    "serving": "not known to refuse: the first attempt runs on it",
    "affinity": "the chat session's previous turn ran elsewhere: the turn starts there",
    "routed": "known not to serve: pre-dispatch routes the first attempt away",
    "forecast": "forecast to run out before the turn ends: the first attempt goes elsewhere",
    "no_alternative": "not a good start, but nothing better is known: it runs as assigned",
    "auto_switch_off": "not a good start, but auto-switch is off: it runs as assigned",
    "pinned": "not a good start, but the agent is pinned: it runs as assigned",
    "policy": "its routing policy forbids it: the turn starts on a plan the policy allows",
    "placement": (
        "serving, but another plan's weekly headroom expires sooner: the turn starts "
        "there and moves the agent (placement)"
    ),
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
    Why.PLACEMENT.value: "placement (weekly headroom that expires sooner)",
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
    Stop.KEY_BUDGET.value: "the key's budget is used up: the turn fails",
    AT_CAPACITY: "every plan it may use is at its cap: the turn fails",
    PROVIDER_OUTAGE: "provider outage: the turn fails fast (upstream_error)",
}
_KEY_CLOSED_TEXT = {
    KeyClosed.FALLBACK_OFF.value: "the API-key fallback is off",
    KeyClosed.NO_KEY.value: "no platform API key is configured",
    KeyClosed.POLICY.value: "the agent's subscription-only policy never bills the key",
    KeyClosed.AGENT_OPTED_OUT.value: "the agent may never bill the key",
    KeyClosed.NOT_A_CLAUDE_RUNTIME.value: "the agent's runtime cannot use the key",
    KeyClosed.REFUSED_RECENTLY.value: "the key was refused recently",
    KeyClosed.BUDGET.value: "a key budget is used up",
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


def _park_text(e: Explanation) -> str:
    if e.parks_until is not None:
        return f"Exhausted, an autonomous turn parks until {_instant(e.parks_until, e.at)}"
    return "Exhausted, an autonomous turn fails (it would not park)"


def explanation_text(explanation: Explanation) -> list[str]:
    """The explanation as lines for a terminal (never a secret: none is held)."""
    e, now = explanation, explanation.at
    trigger = "an autonomous" if e.autonomous else "an interactive"
    session = f" of session {e.session_id}" if e.session_id else ""
    lines = [
        f"Agent {e.agent}: model {e.model or '(default)'}, policy {e.routing_policy}, "
        f"ranking {e.strategy}; {trigger} turn{session} at {now:%Y-%m-%d %H:%M:%S}Z",
    ]
    if e.breaker == breaker.BreakerState.HALF_OPEN.value:
        lines.append("Provider breaker: half-open (one trial turn at a time is sent)")
    elif e.breaker != breaker.BreakerState.CLOSED.value:
        lines.append(f"Provider breaker: {e.breaker}")
    lines += _assigned_text(e)
    if e.planned:
        lines.append(f"Week plan: {e.planned}")
    lines += _order_text(e)
    lines += _excluded_text(e)
    lines.append(_key_text(e))
    if e.ranking_fallback:
        lines.append(f"Ranking: database order ({e.ranking_fallback}): the cache did not rank")
    return lines


def _assigned_text(e: Explanation) -> list[str]:
    now = e.at
    if e.assigned is None:
        return ["Assigned: none (it runs on what it boots with and never walks)"]
    a = e.assigned
    lines = [
        f"Assigned: {a.name}: {_PRE_DISPATCH_TEXT.get(e.pre_dispatch, e.pre_dispatch)}",
        f"  evidence: {_DECIDED_BY_TEXT.get(a.decided_by, a.decided_by)}",
    ]
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
    return lines


def _order_text(e: Explanation) -> list[str]:
    now = e.at
    if e.first is None:
        stop = _STOP_TEXT.get(e.walk_stop, e.walk_stop)
        lines = [f"Next turn: refused before any attempt ({stop})"]
    else:
        why = _WHY_TEXT.get(e.first.why, e.first.why)
        lines = [f"Next turn runs on: {e.first.name} ({why})"]
    lines.append("Order if each refuses:")
    for rung in e.rungs:
        text = f"  {rung.position}. {rung.name} [{_WHY_TEXT.get(rung.why, rung.why)}]"
        if rung.kind == RungKind.SUBSCRIPTION.value:
            text += f": {_figures_text(rung.figures, now)}"
        text += _refusal_suffix(rung.last_refusal_at, rung.last_refusal_resets_at, now)
        lines.append(text)
    if e.ends == "park" and e.parks_until is not None:
        lines.append(
            f"  then: every rung refused: the turn parks until {_instant(e.parks_until, now)}"
        )
    else:
        lines.append(f"  then: {_STOP_TEXT.get(e.walk_stop, e.walk_stop)}")
    if not e.autonomous:
        lines.append(_park_text(e))
    return lines


def _refusal_suffix(at: datetime | None, resets_at: datetime | None, now: datetime) -> str:
    """``; refused <when>, its reset <when>`` for a credential's last refusal, or ''."""
    if at is None:
        return ""
    return f"; refused {_instant(at, now)}, its reset {_instant(resets_at, now)}"


def _excluded_text(e: Explanation) -> list[str]:
    now = e.at
    lines = ["Excluded:"] if e.excluded else []
    for line in e.excluded:
        text = f"  {line.name}: {line.reason}: {line.detail}"
        if line.figures.resets_at is not None:
            text += f"; resets {_instant(line.figures.resets_at, now)}"
        text += _refusal_suffix(line.last_refusal_at, line.last_refusal_resets_at, now)
        lines.append(text)
    return lines


def _key_text(e: Explanation) -> str:
    key, now = e.key, e.at
    if key.available:
        return "Key rung: available"
    text = f"Key rung: closed: {_KEY_CLOSED_TEXT.get(key.closed or '', key.closed)}"
    if key.detail:
        text += f" ({key.detail}; reopens {_instant(key.reopens_at, now)})"
    if key.refused_at is not None:
        whose = f"key …{key.fingerprint}: " if key.fingerprint else ""
        text += (
            f" ({whose}{key.failure_kind} {_instant(key.refused_at, now)}; "
            f"reopens {_instant(key.reopens_at, now)})"
        )
    return text
