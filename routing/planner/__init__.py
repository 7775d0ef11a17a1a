"""The turn planner: the order of a turn, written once, as a pure function.

``plan(evidence, now=...)`` answers the turn's next action (``Send``, ``Record``,
``Finish``, ``Park``, ``Fail``, or ``Need`` a piece of evidence). The executor
(``execution/turn.py``) loops on it; see ``docs/flows/turn-planner.md``.
"""

from __future__ import annotations

from routing.facts import AgentFacts, TurnFacts
from routing.planner.actions import (
    AFFINITY_STAGE,
    PLACEMENT_STAGE,
    PLANNED_STAGE,
    PRE_DISPATCH_STAGE,
    ROUTED_KEY,
    ROUTED_PLAN,
    Action,
    Ask,
    Ended,
    Fail,
    Finish,
    Need,
    Notice,
    Park,
    Record,
    Send,
    Switch,
)
from routing.planner.evidence import (
    UNKNOWN,
    Attempt,
    BudgetRefused,
    Busy,
    Closure,
    Current,
    Event,
    Evidence,
    KeyState,
    Legacy,
    Outcome,
    Previous,
    SettingsFacts,
    StepFacts,
    Unknown,
    Unreachable,
)
from routing.planner.lookups import EXHAUSTED_STOPS
from routing.planner.plan import plan
from routing.rung import KEY_RUNG, RungRef

__all__ = [
    "AFFINITY_STAGE",
    "EXHAUSTED_STOPS",
    "KEY_RUNG",
    "PLACEMENT_STAGE",
    "PLANNED_STAGE",
    "PRE_DISPATCH_STAGE",
    "ROUTED_KEY",
    "ROUTED_PLAN",
    "UNKNOWN",
    "Action",
    "AgentFacts",
    "Ask",
    "Attempt",
    "BudgetRefused",
    "Busy",
    "Closure",
    "Current",
    "Ended",
    "Event",
    "Evidence",
    "Fail",
    "Finish",
    "KeyState",
    "Legacy",
    "Need",
    "Notice",
    "Outcome",
    "Park",
    "Previous",
    "Record",
    "RungRef",
    "Send",
    "SettingsFacts",
    "StepFacts",
    "Switch",
    "TurnFacts",
    "Unknown",
    "Unreachable",
    "plan",
]
