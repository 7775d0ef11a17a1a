"""The week plan at a turn boundary: follow the agent's entry while it is current, or
fall back to today's placement rules (``plan._placement``).

The planning task (``routing/plan_ahead``) decides where each agent should run until
when; a turn reads the agent's entry (``Ask.PLANNED``, one cache read) once pre-dispatch
has let the assignment serve. A current entry (made within ``STALE_AFTER``, not past
its ``until``) answers for placement:

- the assignment: today's placement rules, as without a plan (the plan's LP is
  indifferent between plans that serve the week alike; the rules still use the
  headroom that expires first and keep plans on pace);
- another plan: move there at a turn boundary when the agent has settled (the dwell),
  its look is due (at most once per ``placement.EVERY``), it may switch, and the plan
  is one the ranking admits; the served turn commits it (``Why.PLANNED``);
- the key (the spill): this turn goes to the key when the agent may switch and the key
  is configured; it commits nothing (``Why.SPILL``), so the agent keeps its plan.

No entry, a stale one, or a failed read: today's rules, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from routing.eligibility import Admitted
from routing.facts import AgentFacts
from routing.plan_ahead.week_plan import Planned
from routing.planner.actions import (
    PLACEMENT_STAGE,
    PLANNED_STAGE,
    PRE_DISPATCH_STAGE,
    ROUTED_KEY,
    Ask,
    Need,
    Send,
)
from routing.planner.evidence import UNKNOWN, Evidence
from routing.planner.lookups import (
    key_available,
    look_selection,
    may_switch,
    move_to,
    rung_of,
)
from routing.rung import RungKind
from routing.walk import Pick, Why

Step = Send | Need | None
# A failed read of any of these stages leaves the turn on today's rules (its assignment).
OPTIONAL_READS = frozenset({PLANNED_STAGE, PRE_DISPATCH_STAGE, PLACEMENT_STAGE})


def planned_or_placement(
    evidence: Evidence,
    agent: AgentFacts,
    placement: Callable[[], Step],
    *,
    now: datetime,
) -> Step:
    """The first rung the week plan gives the turn, else ``placement()`` (today's
    rules) when the plan says nothing current about this agent."""
    entry = _entry(evidence, agent, now=now)
    if isinstance(entry, Need):
        return entry
    if entry is None:
        return placement()
    if entry.on_key:
        return _spill(evidence)
    if entry.subscription_id == agent.origin:
        return placement()
    return _move(evidence, agent, entry, now=now)


def _entry(evidence: Evidence, agent: AgentFacts, *, now: datetime) -> Planned | Need | None:
    if agent.origin is None or evidence.skipped & {
        PLANNED_STAGE,
        PRE_DISPATCH_STAGE,
        PLACEMENT_STAGE,
    }:
        return None  # no agent to plan, or a read failed: today's rules
    if not isinstance(evidence.assigned, Admitted):
        return None
    found = evidence.planned
    if found is UNKNOWN:
        return Need(Ask.PLANNED, stage=PLANNED_STAGE)
    if found is None or not found.current(now):
        return None
    return found


def _spill(evidence: Evidence) -> Step:
    """The key for this turn, when the agent may switch and the key is offered (its
    policy, the admin's fallback switch, its budgets: ``key_available``)."""
    switching = may_switch(evidence, PLANNED_STAGE)
    if isinstance(switching, Need) or not switching:
        return switching or None
    offered = key_available(evidence, PLANNED_STAGE)
    if isinstance(offered, Need) or not offered:
        return offered or None
    rung = rung_of(evidence, Pick(RungKind.API_KEY, None, "", Why.SPILL), PLANNED_STAGE)
    if rung is None or isinstance(rung, Need):
        return rung
    return Send(rung, Why.SPILL, routed=ROUTED_KEY)


def _move(evidence: Evidence, agent: AgentFacts, entry: Planned, *, now: datetime) -> Step:
    """The planned plan, through placement's own gates and ranking."""
    selection = look_selection(evidence, agent, PLANNED_STAGE, now=now)
    if selection is None or isinstance(selection, Need):
        return selection
    assert entry.subscription_id is not None  # noqa: S101 - a plan entry names its plan
    return move_to(evidence, selection, entry.subscription_id, Why.PLANNED, PLANNED_STAGE)
