"""The executor's placement look: whether an agent's look is due (a claim in the cache)
and where placement would move it (one read of the cached snapshots). The decision is
the pure rule's (``routing/headroom/placement.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from routing.headroom.placement import EVERY as PLACEMENT_EVERY
from routing.headroom.placement import placement_pick
from subscriptions.headroom.store import snapshots_read
from subscriptions.plan_facts import fresh_for
from trinity.markers import marker_claim


def placement_due(agent_id: int) -> bool:
    """Claim this agent's placement look for ``placement.EVERY``: True if it is due (and
    now claimed), False if another turn looked lately or the cache does not answer."""
    ttl = int(PLACEMENT_EVERY.total_seconds())
    return marker_claim(f"placement-due:{agent_id}", ttl=ttl) is True


def placement_target(
    origin: int, ids: Iterable[int], *, now: datetime, family: str | None
) -> int | None:
    """Of the measured alternatives ``ids`` (rank order), the one placement moves an
    agent on ``origin`` to (``placement.placement_pick``), from one read of the cached
    snapshots; None to stay, also when the cache does not answer."""
    wanted = list(ids)
    found = snapshots_read([origin, *wanted])
    if not found.reachable:
        return None
    readings = found.readings
    return placement_pick(
        readings.get(origin),
        ((pk, readings.get(pk)) for pk in wanted),
        now=now,
        max_age=fresh_for(),
        family=family,
    )
