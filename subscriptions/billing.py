"""The curated billing catalog: what each plan type is and what it does past its quota.

``billing_class`` says how a turn is paid for (``plan``: a flat subscription whose
quota resets; ``metered``: per token). ``overage`` says what the provider does when
the plan's window is exhausted: ``refuse`` (429 until reset) is the only behaviour
the walk relies on; plans that silently bill overage are marked so operators know.
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
    return CATALOG.get((provider, plan_type))
