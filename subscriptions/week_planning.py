"""The week plan in the cache: what the planning task stored, as a turn reads it.

Placeholder for the store (the planning task writes it); a turn's read is one cache
GET of the agent's entry.
"""

from __future__ import annotations

import json
import logging

from django.core.cache import cache

from routing.plan_ahead.week_plan import Planned
from trinity.markers import STORE_ERRORS

logger = logging.getLogger(__name__)


def agent_key(agent_id: int) -> str:
    return f"week-plan:agent:{agent_id}"


def planned_read(agent_id: int) -> Planned | None:
    """The agent's entry in the last week plan; None when there is none, it does not
    decode, or the cache does not answer (the turn keeps today's rules)."""
    try:
        raw = cache.get(agent_key(agent_id))
    except STORE_ERRORS:
        logger.warning("cache unreachable: week plan entry of agent %s unread", agent_id)
        return None
    if raw is None:
        return None
    try:
        return Planned.from_json(json.loads(raw) if isinstance(raw, str | bytes) else raw)
    except (ValueError, KeyError, TypeError):
        logger.warning("week plan: discarding a malformed entry of agent %s", agent_id)
        return None
