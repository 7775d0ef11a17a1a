"""The panel's words for the walk's codes (``routing/walk.py``'s ``Why`` and ``Stop``).

They live beside the codes so a new code and its words change together;
``manage.py panel_tables`` writes them into ``frontend/src/generated/tables.json``,
which the panel reads (``frontend/src/walk.js``), and a test fails when that file is
stale. A code without words here is shown as the code itself.
"""

from __future__ import annotations

from typing import Final

from routing.walk import Stop, Why

# Why a rung was tried, as an attempt's trail says it.
WHY_LABELS: Final[dict[str, str]] = {
    Why.ASSIGNED: "its assigned subscription",
    Why.PRE_DISPATCH: "routed before dispatch: its subscription was known not to serve",
    Why.RANKED: "next best by headroom",
    Why.READMITTED: "readmitted on evidence",
    Why.LAST_RESORT: "last resort: it had refused within 2 h",
    Why.API_KEY: "last rung, billed per token",
    Why.CONCURRENT_SWITCH: "the new assignment after a concurrent turn switched",
    Why.RETRY: "the same credential once more after a provider error (5xx)",
    Why.AFFINITY: "the plan that served this chat session's previous turn (its cache is warm)",
    Why.POLICY: "a plan its routing policy allows (its own subscription is not one)",
    Why.AT_CAPACITY: "another plan: its own was serving its concurrency cap",
    Why.PLACEMENT: "moved at a turn boundary: this plan's weekly headroom expires sooner",
    Why.PLANNED: "moved at a turn boundary: the week plan puts the agent on this plan",
    Why.SPILL: "the week plan has the key take this agent's turns for now",
    # Not a Why: a switch applied from a legacy agent server's answer
    # (execution/sending.py), which names no rung.
    "legacy": "applied by assignment (legacy agent server)",
}

# Why a refused turn's walk stopped, as the turn's trail says it.
STOP_LABELS: Final[dict[str, str]] = {
    Stop.NOT_A_CREDENTIAL_REFUSAL: "Not a quota or credential refusal, so nothing was switched.",
    Stop.NO_SUBSCRIPTION: "The agent has no subscription, so there was nothing to walk from.",
    Stop.AUTO_SWITCH_OFF: "Auto-switch is off: the refusal was recorded and nothing switched.",
    Stop.PINNED: (
        "The agent is pinned to its subscription: a refusal fails the turn instead of switching."
    ),
    Stop.EXHAUSTED: "Every candidate refused.",
    Stop.ALREADY_TRIED: "Every candidate refused.",
    Stop.RUNG_CAP: "Every candidate refused (the walk reached its bound).",
    Stop.BUDGET: (
        "The turn's time budget ran out before another try; sending it again gets a fresh budget."
    ),
    Stop.PROVIDER_OUTAGE: (
        "The provider looks down (its circuit breaker is open): the turn failed fast instead"
        " of walking every plan into the outage. Retry shortly."
    ),
    Stop.AT_CAPACITY: (
        "Every plan this agent may use was serving its concurrency cap. Retry shortly."
    ),
}
