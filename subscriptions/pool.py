"""Reads the dispatch loop needs around the walk: is the assigned plan known not to
serve, is the key rung open, and the rungs' secrets (one query for all of them).

Nothing here probes a provider or writes; the decisions are the pure rules'
(``subscriptions/headroom/rules.py``, ``subscriptions/walk.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from agents.lifecycle import platform_key_allowed
from agents.models import Agent
from agents.rung import Rung, RungKind
from subscriptions.headroom.rules import resolve_rate_limited_now
from subscriptions.headroom.selection import fresh_for
from subscriptions.headroom.store import TurnEvidence
from subscriptions.models import CredentialKind, FailureKind, RateLimitEvent, Subscription
from subscriptions.selectors import skip_window_start
from subscriptions.walk import key_refused_recently
from trinity.models import SystemSettings


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


def key_rung_available(*, agent: Agent, system: SystemSettings, now: datetime) -> bool:
    """The key rung is offered when the fallback is on, the agent is a Claude runtime
    that may bill the key, a key is configured, and the key was not refused recently
    (2h after an auth or billing refusal, 5 minutes after a 429)."""
    if not system.subscription_api_key_fallback or not system.platform_api_key:
        return False
    if not platform_key_allowed(agent, system):
        return False
    latest = (
        RateLimitEvent.objects.filter(
            credential_kind=CredentialKind.API_KEY, occurred_at__gt=skip_window_start(now)
        )
        .order_by("-occurred_at")
        .values_list("failure_kind", "occurred_at")
        .first()
    )
    if latest is None:
        return True
    kind, occurred_at = latest
    return not key_refused_recently(failure_kind=kind, occurred_at=occurred_at, now=now)


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
