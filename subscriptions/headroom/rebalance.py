"""Proactive rebalancing under the balanced strategy, off the turn path.

The served turn never ranks (DESIGN.md, "The turn path's budget"); the walk and
pre-dispatch rank only when a plan refuses or is known to. This moves assignments
ahead of that, from the headroom sampler's beat: for each agent the hysteresis
(``rebalance_plan.rebalance_plan``) says whether its plan should give it up, and a move goes
through the walk's compare-and-set (``assignment_commit``: one notification per
switch). Reads cached readings only, never probes, and does nothing when the store
is unreachable.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from agents.models import Agent
from routing import policy
from routing.headroom.balance import Balance
from routing.headroom.rebalance_plan import Rebalance, rebalance_plan
from routing.headroom.windows import family_window
from subscriptions.headroom.store import snapshots_read
from subscriptions.plan_facts import candidates_read, fresh_for
from subscriptions.services import assignment_commit
from trinity.models import RoutingStrategy
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)


@dataclass
class RebalanceReport:
    """What one rebalance did: ``skipped`` names why it did nothing at all."""

    skipped: str = ""
    agents: int = 0
    moved: list[tuple[str, int, int]] = field(default_factory=list)  # agent, from, to
    lost: int = 0  # compare-and-set lost to a turn that switched the agent meanwhile


def _describe(balance: Balance | None) -> str:
    if balance is None:
        return "no fresh reading"
    return f"{balance.remaining:.1f}% left, score {balance.score:.1f} ({balance.window})"


def _why(move: Rebalance) -> dict[str, object]:
    return {
        "why": "rebalance",
        "move": move.move.value,
        "from": _describe(move.incumbent),
        "to": _describe(move.challenger),
        "score": round(move.challenger.score, 1),
        "limiting_window": move.challenger.window,
    }


def assignments_rebalance(*, now: datetime) -> RebalanceReport:
    """Move the assignments the hysteresis calls for, under the balanced strategy.

    Does nothing unless ``TRINITY_REBALANCE`` is set, ``routing_strategy`` is balanced
    and auto-switch is on.
    Considers every agent with a subscription whose leave verdict allows a move (not
    pinned: ``policy.agent_leave_verdict``); a ``subscription-only`` agent moves only
    among hard-stop plans. Each move is a
    compare-and-set on the agent's assignment as read here, so a turn that switched
    the agent meanwhile wins and the move is dropped. Never raises for a store outage.
    """
    if not settings.TRINITY_REBALANCE:
        return RebalanceReport(skipped="off")
    system = system_settings_get()
    if system.routing_strategy != RoutingStrategy.BALANCED:
        return RebalanceReport(skipped="banded")
    if not system.auto_switch_subscriptions:
        return RebalanceReport(skipped="auto_switch_off")
    agents = [
        agent
        for agent in Agent.objects.filter(subscription__isnull=False).order_by("pk")
        if policy.agent_leave_verdict(agent, system).allowed
    ]
    report = RebalanceReport(agents=len(agents))
    groups: dict[tuple[str, bool], list[Agent]] = defaultdict(list)
    for agent in agents:
        groups[(agent.provider, policy.only_hard_stop(agent.routing_policy))].append(agent)
    for (provider, hard_stop), members in groups.items():
        if not _group_rebalance(provider, hard_stop, members, report=report, now=now):
            logger.warning("rebalance: headroom store unreachable, no agent moved")
            return RebalanceReport(skipped="store_unreachable", agents=len(agents))
    return report


def _group_rebalance(
    provider: str,
    hard_stop: bool,
    members: list[Agent],
    *,
    report: RebalanceReport,
    now: datetime,
) -> bool:
    """Plan and apply the moves of one provider's agents that share a hard-stop rule,
    into ``report``; False (nothing moved) when the store is unreachable."""
    candidates = candidates_read(provider=provider, now=now)
    snapshots = snapshots_read(c.subscription_id for c in candidates)
    if not snapshots.reachable:
        return False
    by_key: dict[Hashable, Agent] = {agent.pk: agent for agent in members}
    names = {c.subscription_id: c.name for c in candidates}
    moves = rebalance_plan(
        [(a.pk, a.subscription_id, family_window(a.model)) for a in members if a.subscription_id],
        candidates,
        snapshots.readings,
        now=now,
        max_age=fresh_for(),
        provider=provider,
        routing_policy=policy.SUBSCRIPTION_ONLY if hard_stop else policy.THRIFTY,
    )
    for move in moves:
        _move_apply(move, by_key[move.agent], names, report=report, now=now)
    return True


def _move_apply(
    move: Rebalance,
    agent: Agent,
    names: dict[int, str],
    *,
    report: RebalanceReport,
    now: datetime,
) -> None:
    """Commit one planned move through the walk's compare-and-set, into ``report``."""
    to = move.to.candidate
    won = assignment_commit(
        agent=agent,
        expected_subscription_id=move.from_id,
        expected_subscription_name=names.get(move.from_id),
        subscription_id=to.subscription_id,
        subscription_name=to.name,
        why=_why(move),
        now=now,
    )
    if not won:
        report.lost += 1
        return
    report.moved.append((agent.name, move.from_id, to.subscription_id))
    logger.info(
        "rebalance: agent %s moved from subscription %d to %d (%s)",
        agent.name,
        move.from_id,
        to.subscription_id,
        move.move.value,
    )
