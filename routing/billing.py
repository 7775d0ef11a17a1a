"""The curated billing catalog: what each plan type is and what it does past its quota.

``billing_class`` says how a turn is paid for (``plan``: a flat subscription whose
quota resets; ``metered``: per token; ``unknown``: a plan type nobody curated).
``overage`` says what the provider does when the plan's window is exhausted:
``refuse`` (429 until reset) is the only behaviour the walk relies on; plans that
silently bill overage are marked so operators know.

An uncurated plan type (one a row carries that this catalog does not list, e.g.
after an admin edit or a type dropped from the catalog) is ``unknown`` and treated as
metered: its overage is no hard stop, so a ``subscription-only`` agent never lands
on it by accident. Registration still accepts only curated types.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanEntry:
    provider: str
    plan_type: str
    label: str
    billing_class: str
    overage: str


PLAN = "plan"
METERED = "metered"
UNKNOWN = "unknown"
REFUSE = "refuse"


CATALOG: dict[tuple[str, str], PlanEntry] = {
    (e.provider, e.plan_type): e
    for e in [
        PlanEntry("anthropic", "pro", "Claude Pro", "plan", "refuse"),
        PlanEntry("anthropic", "max-5x", "Claude Max 5x", "plan", "refuse"),
        PlanEntry("anthropic", "max-20x", "Claude Max 20x", "plan", "refuse"),
        PlanEntry("anthropic", "team", "Claude Team", "plan", "refuse"),
        PlanEntry("anthropic", "enterprise", "Claude Enterprise", "plan", "bill_overage"),
        PlanEntry("openai-codex", "plus", "ChatGPT Plus", "plan", "refuse"),
        PlanEntry("openai-codex", "pro", "ChatGPT Pro", "plan", "refuse"),
        PlanEntry("openai-codex", "team", "ChatGPT Team", "plan", "refuse"),
        PlanEntry("openai-codex", "business", "ChatGPT Business", "plan", "refuse"),
        PlanEntry("openai-codex", "enterprise", "ChatGPT Enterprise", "plan", "bill_overage"),
    ]
}


def plan_types(provider: str) -> list[str]:
    return [plan for (prov, plan) in CATALOG if prov == provider]


def lookup(provider: str, plan_type: str) -> PlanEntry | None:
    """The curated entry, or None for a plan type the catalog does not list."""
    return CATALOG.get((provider, plan_type))


def classify(provider: str, plan_type: str) -> PlanEntry:
    """The curated entry, else an ``unknown`` one (metered semantics, no hard stop)."""
    entry = lookup(provider, plan_type)
    if entry is not None:
        return entry
    return PlanEntry(provider, plan_type, f"Uncurated plan {plan_type!r}", UNKNOWN, UNKNOWN)


def hard_stop(entry: PlanEntry) -> bool:
    """Whether past its quota the plan refuses (429 until reset) instead of billing:
    only a curated ``plan`` whose overage is ``refuse``."""
    return entry.billing_class == PLAN and entry.overage == REFUSE


def hard_stop_plan_types(provider: str) -> list[str]:
    """The provider's curated plan types whose overage is a documented hard stop."""
    return [e.plan_type for e in CATALOG.values() if e.provider == provider and hard_stop(e)]
