"""Reads the dispatch loop needs around the walk: is the assigned plan known not to
serve, is the key rung open, and the rungs' secrets (one query for all of them).

Nothing here probes a provider or writes; the decisions are the pure rules'
(``subscriptions/headroom/rules.py``, ``subscriptions/walk.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from agents.lifecycle import platform_key_allowed
from agents.models import Agent
from agents.rung import Rung, RungKind
from subscriptions.headroom.rules import resolve_rate_limited_now
from subscriptions.headroom.selection import fresh_for
from subscriptions.headroom.store import TurnEvidence
from subscriptions.models import CredentialKind, FailureKind, RateLimitEvent, Subscription
from subscriptions.selectors import skip_window_start
from subscriptions.walk import Stop, key_refused_recently
from trinity.models import RoutingPolicy, SystemSettings


def assigned_refusing(evidence: TurnEvidence, *, now: datetime) -> bool:
    """Whether the assigned subscription is known not to serve now (pre-dispatch).

    Three-state, the same rule the display uses: a usable reading decides in both
    directions; without one, a rate-limit refusal inside the 2h window does, unless
    its reset (or the reading's blocked window's) has already elapsed. An unreachable
    cache knows nothing, so the turn dispatches as assigned.
    """
    if not evidence.reachable:
        return False
    mark = evidence.refusal
    if mark is not None and mark.at <= skip_window_start(now):
        mark = None  # aged out of the window the events count in
    return resolve_rate_limited_now(
        evidence.reading,
        now=now,
        max_age=fresh_for(),
        events_say_limited=lambda: mark is not None and mark.failure_kind == FailureKind.RATE_LIMIT,
        last_refusal_at=mark.at if mark is not None else None,
        refusal_resets_at=mark.resets_at if mark is not None else None,
    )


class KeyClosed(StrEnum):
    """Why the key rung is not offered (``key_rung_state``)."""

    FALLBACK_OFF = "fallback_off"
    NO_KEY = "no_key"
    # A subscription-only agent never bills the key.
    POLICY = "policy"
    AGENT_OPTED_OUT = "agent_opted_out"
    NOT_A_CLAUDE_RUNTIME = "not_a_claude_runtime"
    REFUSED_RECENTLY = "refused_recently"


@dataclass(frozen=True, slots=True)
class KeyRungState:
    """Whether the key rung is open, and if not, why; with the refusal that closed it."""

    closed: KeyClosed | None = None
    refused_at: datetime | None = None
    failure_kind: str | None = None

    @property
    def available(self) -> bool:
        return self.closed is None


def key_rung_state(*, agent: Agent, system: SystemSettings, now: datetime) -> KeyRungState:
    """Whether the key rung is offered, and the first gate that closes it: the
    fallback is off, no key is configured, the agent may not bill the key (its
    subscription-only policy, opted out, or not a Claude runtime), or the key was
    refused recently (2h after an auth or billing refusal, 5 minutes after a 429).
    Reads one row at most; writes nothing. The turn (``key_rung_available``) and the
    routing explainer both ask this, so they agree.
    """
    if not system.subscription_api_key_fallback:
        return KeyRungState(KeyClosed.FALLBACK_OFF)
    if not system.platform_api_key:
        return KeyRungState(KeyClosed.NO_KEY)
    if not platform_key_allowed(agent, system):
        # The rule said no; name which of its conditions did, in its own order.
        if agent.routing_policy == RoutingPolicy.SUBSCRIPTION_ONLY:
            return KeyRungState(KeyClosed.POLICY)
        if agent.use_platform_api_key is False:
            return KeyRungState(KeyClosed.AGENT_OPTED_OUT)
        return KeyRungState(KeyClosed.NOT_A_CLAUDE_RUNTIME)
    latest = (
        RateLimitEvent.objects.filter(
            credential_kind=CredentialKind.API_KEY, occurred_at__gt=skip_window_start(now)
        )
        .order_by("-occurred_at")
        .values_list("failure_kind", "occurred_at")
        .first()
    )
    if latest is None:
        return KeyRungState()
    kind, occurred_at = latest
    if key_refused_recently(failure_kind=kind, occurred_at=occurred_at, now=now):
        return KeyRungState(KeyClosed.REFUSED_RECENTLY, occurred_at, kind)
    return KeyRungState()


def switching_stop(*, agent: Agent, system: SystemSettings) -> Stop | None:
    """Why ``agent``'s turns may not leave its assignment at all, or None: auto-switch
    is off, or the agent is pinned. Pre-dispatch and the walk both stop on it."""
    if not system.auto_switch_subscriptions:
        return Stop.AUTO_SWITCH_OFF
    if agent.routing_policy == RoutingPolicy.PINNED:
        return Stop.PINNED
    return None


def key_rung_available(*, agent: Agent, system: SystemSettings, now: datetime) -> bool:
    """The key rung is offered when ``key_rung_state`` finds no gate closed."""
    return key_rung_state(agent=agent, system=system, now=now).available


def subscription_count(provider: str) -> int:
    return Subscription.objects.filter(provider=provider).count()


def subscription_rungs(ids: Iterable[int]) -> dict[int, Rung]:
    """The rungs of ``ids`` with their tokens, in one query (the walk's candidates)."""
    wanted = list(ids)
    if not wanted:
        return {}
    rows = Subscription.objects.filter(pk__in=wanted).only("pk", "name", "token")
    return {
        row.pk: Rung(RungKind.SUBSCRIPTION, row.token, row.pk, row.name)
        for row in rows
        if row.token
    }


def key_rung(system: SystemSettings) -> Rung | None:
    if not system.platform_api_key:
        return None
    return Rung(RungKind.API_KEY, system.platform_api_key)
