"""Whether the key rung is offered to an agent's turn, and if not, the first gate that
closes it. The turn and the routing explainer both ask ``key_rung_state``, so they agree.
Reads only; nothing here probes a provider or writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from agents.models import Agent
from routing import policy
from routing.providers import platform_key
from routing.walk import key_refused_recently
from subscriptions.key_refusals import key_latest_refusal
from subscriptions.key_spend import BudgetClosed, key_budget_closed
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


def _budget_state(*, agent: Agent, system: SystemSettings, now: datetime) -> KeyRungState:
    """The last gate: a consumed key budget closes the rung (no cap, no query)."""
    closed = key_budget_closed(agent=agent, system=system, now=now)
    return KeyRungState() if closed is None else KeyRungState(KeyClosed.BUDGET, budget=closed)


def key_rung_available(*, agent: Agent, system: SystemSettings, now: datetime) -> bool:
    """The key rung is offered when ``key_rung_state`` finds no gate closed."""
    return key_rung_state(agent=agent, system=system, now=now).available
