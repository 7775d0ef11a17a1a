"""The week plan in the cache: the whole plan for the panel, one entry per agent for
its turns.

Here, on the agents' floor, not beside the planning task in ``subscriptions/``: the
Agents API (this floor) shows each agent's entry, and the turn (``execution/``) reads
it; both may import down, neither could import the task's package.

Keys: ``week-plan:last`` (the plan's JSON, ``WeekPlan.to_json``, kept a week so a
stale plan is still shown as stale) and ``week-plan:agent:<id>`` (its ``Planned``
entry, TTL ``STALE_AFTER``: an entry the planner stopped refreshing is gone when it
could no longer be acted on). Values are JSON (``trinity/cache_json.py``). Nothing
here raises for an outage: a read answers None (the turn falls back to today's
rules), a write answers False. The plan holds names and ids, never a credential.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

from routing.plan_ahead.week_plan import STALE_AFTER, Planned, WeekPlan
from trinity.markers import STORE_ERRORS

logger = logging.getLogger(__name__)

LAST_KEY = "week-plan:last"
# The whole plan outlives its entries: the panel says "stale since …" rather than
# "no plan" when the planner stops.
LAST_TTL_SECONDS = 7 * 24 * 3600
ENTRY_TTL_SECONDS = int(STALE_AFTER.total_seconds())
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError)


def planned_key(agent_id: int) -> str:
    return f"week-plan:agent:{agent_id}"


def week_plan_store(plan: WeekPlan) -> bool:
    """Store ``plan`` (the whole plan and one entry per agent placed in it) and drop
    the entries of agents the previous plan placed and this one does not (a deleted
    agent, one the planner left alone): an entry never outlives the plan that made
    it. Two round trips (read the previous plan, write); False if the cache is
    unreachable (the previous plan stays and goes stale)."""
    entries = {planned_key(p.agent_id): p.to_json() for p in plan.placements}
    try:
        previous = cache.get(LAST_KEY)
        cache.set_many(entries, timeout=ENTRY_TTL_SECONDS)
        cache.set(LAST_KEY, plan.to_json(), timeout=LAST_TTL_SECONDS)
        dropped = _placed(previous) - set(entries)
        if dropped:
            cache.delete_many(sorted(dropped))
    except STORE_ERRORS:
        logger.warning("cache unreachable: week plan not stored")
        return False
    return True


def _placed(raw: Any) -> set[str]:
    """The entry keys of the agents a stored plan placed (none when unreadable)."""
    try:
        return {planned_key(int(p["agent_id"])) for p in raw["placements"]}
    except _MALFORMED:
        return set()


def planned_read(agent_id: int) -> Planned | None:
    """``agent_id``'s entry: one cache GET. None when there is none, it does not
    decode, or the cache is unreachable; whether it is current is ``Planned.current``."""
    try:
        raw = cache.get(planned_key(agent_id))
    except STORE_ERRORS:
        return None
    return _decoded(raw, agent_id)


def planned_read_many(agent_ids: Iterable[int]) -> dict[int, Planned]:
    """The entries of ``agent_ids`` that are stored and decode: one ``get_many`` (one
    MGET on Redis) whatever their number; empty when the cache is unreachable."""
    keys = {planned_key(pk): pk for pk in agent_ids}
    if not keys:
        return {}
    try:
        raw = cache.get_many(list(keys))
    except STORE_ERRORS:
        return {}
    found = {keys[key]: _decoded(value, keys[key]) for key, value in raw.items()}
    return {pk: entry for pk, entry in found.items() if entry is not None}


def _decoded(raw: Any, agent_id: int) -> Planned | None:
    if raw is None:
        return None
    try:
        entry = Planned.from_json(raw)
    except _MALFORMED:
        logger.warning("week plan: discarding a malformed entry of agent %d", agent_id)
        return None
    # An entry under another agent's key is no entry of this one.
    return entry if entry.agent_id == agent_id else None


def week_plan_read() -> WeekPlan | None:
    """The last plan stored (stale or not: ``made_at`` says); None when there is none,
    it does not decode, or the cache is unreachable."""
    try:
        raw = cache.get(LAST_KEY)
    except STORE_ERRORS:
        return None
    if raw is None:
        return None
    try:
        return WeekPlan.from_json(raw)
    except _MALFORMED:
        logger.warning("week plan: discarding a malformed stored plan")
        return None


def planned_json(entry: Planned) -> dict[str, Any]:
    """An entry as the APIs show it: where (the plan's name, or "the platform key"),
    until when, why, and the explainer's line (instants as datetimes: DRF renders
    them as every other instant of the API)."""
    return {
        "kind": entry.kind,
        "subscription_id": entry.subscription_id,
        "where": "the platform key" if entry.on_key else entry.name,
        "until": entry.until,
        "because": entry.because,
        "made_at": entry.made_at,
        "text": entry.text(),
    }
