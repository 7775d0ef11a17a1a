"""The week plan's cache reads, where the turn's gatherers import them.

One implementation: ``agents/week_plan_store.py`` (on the agents' floor, so the
Agents API reads it too). The planning task is ``subscriptions/week_plan/``.
"""

from __future__ import annotations

from agents.week_plan_store import planned_key as agent_key
from agents.week_plan_store import planned_read, planned_read_many, week_plan_read

__all__ = ["agent_key", "planned_read", "planned_read_many", "week_plan_read"]
