"""The platform keys: one per-token API key per provider, each the last rung of the
turns of that provider's agents only, each with its own fleet budgets.

Anthropic's key is the one the platform always had (``SystemSettings.platform_api_key``);
OpenAI's sits beside it (``SystemSettings.openai_platform_api_key``) and serves Codex
agents. Every reader of a key for a turn or an agent asks ``platform_key(system,
provider)`` with the agent's provider, so a Claude agent never reaches the OpenAI key
and a Codex agent never reaches the Anthropic one.

Pure: no query and no Django import; a key is read from the ``SystemSettings`` row
the caller holds, by the field names of its slot. The provider values are
``subscriptions.models.Provider``'s, spelled here because the routing core imports
nothing above it (a test pins that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from routing.secret import SecretValue

ANTHROPIC = "anthropic"
OPENAI = "openai-codex"
# What the operator calls each provider (the model's choices and the panel's form).
PROVIDER_LABELS: dict[str, str] = {
    ANTHROPIC: "Anthropic (Claude plans)",
    OPENAI: "OpenAI (ChatGPT/Codex plans)",
}


@dataclass(frozen=True, slots=True)
class KeySlot:
    """Where one provider's key and its fleet budgets live on ``SystemSettings``, and
    what the operator calls it."""

    provider: str
    secret_field: str
    fingerprint_field: str
    daily_field: str
    monthly_field: str
    # The rung's name in a turn's trail.
    label: str
    # What the budgets' sentences call it ("the platform key's daily budget ...").
    budget_label: str
    # The ledger scope of the key's fleet-wide spend (``subscriptions.models.KeySpend``).
    fleet_scope: str


SLOTS: dict[str, KeySlot] = {
    ANTHROPIC: KeySlot(
        ANTHROPIC,
        "platform_api_key",
        "platform_api_key_fingerprint",
        "key_budget_daily_usd",
        "key_budget_monthly_usd",
        "platform API key",
        "platform key",
        # The scope the Anthropic key's spend always had: existing rows keep counting.
        "fleet",
    ),
    OPENAI: KeySlot(
        OPENAI,
        "openai_platform_api_key",
        "openai_platform_api_key_fingerprint",
        "openai_key_budget_daily_usd",
        "openai_key_budget_monthly_usd",
        "OpenAI platform key",
        "OpenAI platform key",
        "fleet:openai-codex",
    ),
}


def key_slot(provider: str) -> KeySlot | None:
    """The slot of ``provider``'s key, or None for a provider without one."""
    return SLOTS.get(provider)


def platform_key(system: object, provider: str) -> tuple[SecretValue | None, str]:
    """``provider``'s platform key and its fingerprint (last 4), from the row in memory.

    (None, "") when none is configured, and for a provider that has no key slot: an
    unknown provider reaches no key (the fail-safe reading).
    """
    slot = SLOTS.get(provider)
    if slot is None:
        return None, ""
    secret: SecretValue | None = getattr(system, slot.secret_field)
    if not secret:
        return None, ""
    return secret, getattr(system, slot.fingerprint_field)


def platform_key_configured(system: object, provider: str) -> bool:
    return platform_key(system, provider)[0] is not None


def fleet_key_budgets(system: object, provider: str) -> tuple[Decimal | None, Decimal | None]:
    """The (daily, monthly) fleet-wide caps on ``provider``'s key (None: no cap)."""
    slot = SLOTS.get(provider)
    if slot is None:
        return None, None
    return getattr(system, slot.daily_field), getattr(system, slot.monthly_field)


def key_label(provider: str) -> str:
    """What the operator calls ``provider``'s key ("platform API key" for Anthropic's)."""
    slot = SLOTS.get(provider)
    return slot.label if slot is not None else SLOTS[ANTHROPIC].label


def fleet_scope(provider: str) -> str:
    """The ledger scope of ``provider``'s fleet-wide key spend."""
    slot = SLOTS.get(provider)
    return slot.fleet_scope if slot is not None else SLOTS[ANTHROPIC].fleet_scope


def is_fleet_scope(scope: str) -> bool:
    """Whether ``scope`` is a key's fleet-wide ledger (every owner's turns)."""
    return any(scope == slot.fleet_scope for slot in SLOTS.values())


def fleet_scope_provider(scope: str) -> str | None:
    """The provider whose fleet ledger ``scope`` is, or None for an agent's scope."""
    for slot in SLOTS.values():
        if scope == slot.fleet_scope:
            return slot.provider
    return None
