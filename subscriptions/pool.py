"""Reads the dispatch loop needs around the walk: is the assigned plan known not to
serve, is the key rung open, and the rungs' secrets (one query for all of them).

Nothing here probes a provider or writes; the decisions are the pure rules'
(``subscriptions/headroom/``, ``routing/walk.py``) and the planner's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db.models import Q

from agents.models import Agent
from routing import policy, providers
from routing.headroom.placement import EVERY as PLACEMENT_EVERY
from routing.headroom.placement import placement_pick
from routing.providers import key_label, platform_key
from routing.rung import Rung, RungKind
from routing.walk import KEY_RATE_LIMIT_PAUSE, Stop, key_refused_recently
from subscriptions.headroom.store import snapshots_read
from subscriptions.key_spend import BudgetClosed, key_budget_closed
from subscriptions.models import CredentialKind, FailureKind, RateLimitEvent, Subscription
from subscriptions.plan_facts import fresh_for
from subscriptions.selectors import skip_window_start
from trinity.markers import marker_claim
from trinity.models import SystemSettings


class KeyClosed(StrEnum):
    """Why the key rung is not offered (``key_rung_state``): the key verdict's reasons
    (``policy.KeyRefusal``, same values), then the gates of the moment."""

    FALLBACK_OFF = policy.KeyRefusal.FALLBACK_OFF.value
    NO_KEY = policy.KeyRefusal.NO_KEY.value
    # A subscription-only agent never bills the key.
    POLICY = policy.KeyRefusal.POLICY.value
    AGENT_OPTED_OUT = policy.KeyRefusal.AGENT_OPTED_OUT.value
    NOT_A_CLAUDE_RUNTIME = policy.KeyRefusal.NOT_A_CLAUDE_RUNTIME.value
    REFUSED_RECENTLY = "refused_recently"
    # A key budget (agent or fleet, day or month) is consumed (``subscriptions/key_spend.py``).
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class KeyRungState:
    """Whether the key rung is open, and if not, why; with the refusal that closed it."""

    closed: KeyClosed | None = None
    refused_at: datetime | None = None
    failure_kind: str | None = None
    budget: BudgetClosed | None = None
    # The last 4 of the key that refused (the configured one), for the explainer.
    fingerprint: str = ""

    @property
    def available(self) -> bool:
        return self.closed is None


def placement_due(agent_id: int) -> bool:
    """Claim this agent's placement look for ``placement.EVERY``: True if it is due (and
    now claimed), False if another turn looked lately or the cache does not answer."""
    ttl = int(PLACEMENT_EVERY.total_seconds())
    return marker_claim(f"placement-due:{agent_id}", ttl=ttl) is True


def placement_target(
    origin: int, ids: Iterable[int], *, now: datetime, family: str | None
) -> int | None:
    """Of the measured alternatives ``ids`` (rank order), the one placement moves an
    agent on ``origin`` to (``placement.placement_pick``), from one read of the cached
    snapshots; None to stay, also when the cache does not answer."""
    wanted = list(ids)
    found = snapshots_read([origin, *wanted])
    if not found.reachable:
        return None
    readings = found.readings
    return placement_pick(
        readings.get(origin),
        ((pk, readings.get(pk)) for pk in wanted),
        now=now,
        max_age=fresh_for(),
        family=family,
    )


def key_rung_state(*, agent: Agent, system: SystemSettings, now: datetime) -> KeyRungState:
    """Whether the key rung of ``agent``'s provider (``Agent.provider``: a Claude agent's
    is the Anthropic key, a Codex agent's the OpenAI key; never the other's) is offered,
    and the first gate that closes it: the key verdict (``policy.agent_key_verdict``: the
    fallback is off, no key of its provider is configured, the agent's subscription-only
    policy, opted out, or not a runtime that can use a key), or that key was refused
    recently (2h after an auth or billing refusal, 5 minutes after a 429), or one of its
    spend budgets is consumed. Reads one refusal row and, when a budget applies, the
    budget's ledger rows; writes nothing. The turn (``key_rung_available``) and the
    routing explainer both ask this, so they agree.
    """
    verdict = policy.agent_key_verdict(agent, system)
    if verdict.refusal is not None:
        return KeyRungState(KeyClosed(verdict.refusal.value))
    provider = agent.provider
    latest = key_latest_refusal(system, now=now, provider=provider)
    if latest is None:
        return _budget_state(agent=agent, system=system, now=now)
    kind, occurred_at = latest
    if key_refused_recently(failure_kind=kind, occurred_at=occurred_at, now=now):
        fingerprint = platform_key(system, provider)[1]
        return KeyRungState(KeyClosed.REFUSED_RECENTLY, occurred_at, kind, fingerprint=fingerprint)
    return _budget_state(agent=agent, system=system, now=now)


def key_refusals_of(fingerprint: str, *, provider: str) -> Q:
    """The refusal rows that belong to ``provider``'s key of ``fingerprint``.

    A refusal belongs to the key it was made with (by fingerprint): a replaced key
    starts clean, and the other provider's key's refusals are not this one's. A row
    recorded before fingerprints were kept counts against the configured Anthropic key
    (the conservative reading of a refusal of unknown key: every such row was made
    with it, the only key there was then), never against the OpenAI key.
    """
    whose = Q(credential_fingerprint=fingerprint)
    if provider == providers.ANTHROPIC:
        whose |= Q(credential_fingerprint="")
    return whose & Q(credential_kind=CredentialKind.API_KEY)


def key_latest_refusal(
    system: SystemSettings, *, now: datetime, provider: str
) -> tuple[str | None, datetime] | None:
    """The latest refusal (failure kind, instant) of ``provider``'s key configured now,
    inside the skip window, or None (also when no key of ``provider`` is configured and
    only legacy rows could match an OpenAI key). Whose refusal is whose:
    ``key_refusals_of``."""
    secret, fingerprint = platform_key(system, provider)
    if secret is None and provider != providers.ANTHROPIC:
        return None
    return (
        RateLimitEvent.objects.filter(
            key_refusals_of(fingerprint, provider=provider),
            occurred_at__gt=skip_window_start(now),
        )
        .order_by("-occurred_at")
        .values_list("failure_kind", "occurred_at")
        .first()
    )


def key_reopens_at(*, failure_kind: str | None, refused_at: datetime) -> datetime:
    """When a key refusal stops closing the key's rung: 5 minutes after a 429, else
    when it leaves the skip window (the constants ``key_refused_recently`` reads)."""
    if failure_kind == FailureKind.RATE_LIMIT:
        return refused_at + KEY_RATE_LIMIT_PAUSE
    return refused_at + timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)


def key_refusal_view(
    system: SystemSettings, *, now: datetime, provider: str
) -> dict[str, Any] | None:
    """``provider``'s configured key's refusal that closes its rung now, for the Settings
    page: its fingerprint, kind, instant and reopening; None when the rung is not closed
    by one."""
    secret, fingerprint = platform_key(system, provider)
    latest = key_latest_refusal(system, now=now, provider=provider) if secret else None
    if latest is None:
        return None
    kind, refused_at = latest
    if not key_refused_recently(failure_kind=kind, occurred_at=refused_at, now=now):
        return None
    return {
        "fingerprint": fingerprint,
        "failure_kind": kind,
        "refused_at": refused_at,
        "reopens_at": key_reopens_at(failure_kind=kind, refused_at=refused_at),
    }


def _budget_state(*, agent: Agent, system: SystemSettings, now: datetime) -> KeyRungState:
    """The last gate: a consumed key budget closes the rung (no cap, no query)."""
    closed = key_budget_closed(agent=agent, system=system, now=now)
    return KeyRungState() if closed is None else KeyRungState(KeyClosed.BUDGET, budget=closed)


def switching_stop(*, agent: Agent, system: SystemSettings) -> Stop | None:
    """Why ``agent``'s turns may not leave its assignment at all, or None: the leave
    verdict (``policy.agent_leave_verdict``: auto-switch is off, or the agent is
    pinned) as the walk's stop. Pre-dispatch and the walk both stop on it. A thin
    adapter: new code asks the verdict."""
    refusal = policy.agent_leave_verdict(agent, system).refusal
    return None if refusal is None else Stop(refusal.value)


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
    rows = Subscription.objects.filter(pk__in=wanted).only("pk", "name", "token", "provider")
    return {
        row.pk: Rung(RungKind.SUBSCRIPTION, row.token, row.pk, row.name, row.provider)
        for row in rows
        if row.token
    }


def key_rung(system: SystemSettings, *, provider: str) -> Rung | None:
    """The rung of ``provider``'s platform key (named for which key it is), or None when
    that provider has none configured. A turn asks with its agent's provider."""
    secret, _ = platform_key(system, provider)
    if secret is None:
        return None
    return Rung(RungKind.API_KEY, secret, name=key_label(provider), provider=provider)


# The routing policy's verdicts (``routing/policy.py``) in the shapes the
# dispatch loop and the explainer read: thin adapters, kept with their signatures.


def assignment_policy_refusal(agent: Agent) -> str:
    """Why ``agent``'s policy forbids its turns when it has no assignment at all, or ""
    when it may run (``policy.agent_start_verdict``), in the operator's words. An
    assignment's own verdict is ``admit``'s (``plan_facts``). The text names no secret."""
    if agent.subscription_id is not None:
        return ""
    refusal = policy.agent_start_verdict(agent).refusal
    if refusal is None:
        return ""
    return plan_refusal_text(refusal)


def plan_refusal_text(refusal: policy.PlanRefusal) -> str:
    """The operator's sentence for the policy's refusal of a turn with no plan."""
    return (
        "its routing policy is subscription-only and it has no subscription; "
        "it never bills the platform API key"
    )
