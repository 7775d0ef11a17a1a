"""The week plan as a signed-in user may read it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from agents.selectors import agents_visible_to
from agents.week_plan_store import planned_json, week_plan_read
from routing.plan_ahead.week_plan import STALE_AFTER
from subscriptions.models import Subscription


def week_plan_visible(*, user: AbstractBaseUser | AnonymousUser, now: datetime) -> dict[str, Any]:
    """The last stored plan for ``user`` at ``now``: when it was made and whether it is
    stale (older than ``STALE_AFTER``: turns no longer act on it), the key's planned
    spend, the spill, each plan's reserve (the pool is every user's to see, as on the
    Subscriptions page) and the placements of the agents ``user`` may see (an
    operator's own, an admin's every one), with their names. Two queries and one cache
    read; ``made_at`` None when no plan is stored (or the cache does not answer)."""
    plan = week_plan_read()
    if plan is None:
        return {
            "made_at": None,
            "stale": True,
            "status": "",
            "solve_seconds": None,
            "key_usd": None,
            "demand_mtok": None,
            "placements": [],
            "reserves": [],
            "spill": [],
        }
    agent_ids = [p.agent_id for p in plan.placements]
    agents = {
        pk: (name, owner)
        for pk, name, owner in agents_visible_to(user)
        .filter(pk__in=agent_ids)
        .values_list("pk", "name", "owner__username")
    }
    names = dict(Subscription.objects.filter(pk__in=list(plan.reserves)).values_list("pk", "name"))
    return {
        "made_at": plan.made_at,
        "stale": now - plan.made_at > STALE_AFTER,
        "status": plan.status,
        "solve_seconds": plan.solve_seconds,
        "key_usd": plan.key_usd,
        "demand_mtok": plan.demand_mtok,
        "placements": [
            {
                "agent": agents[p.agent_id][0],
                "owner": agents[p.agent_id][1],
                "current": p.current(now),
                **planned_json(p),
            }
            for p in plan.placements
            if p.agent_id in agents
        ],
        "reserves": [
            {"subscription_id": pk, "name": names[pk], "percent": percent}
            for pk, percent in sorted(plan.reserves.items(), key=lambda kv: names.get(kv[0], ""))
            if pk in names
        ],
        "spill": [
            {"family": s.family, "since": s.since, "until": s.until, "tokens": s.tokens}
            for s in plan.spill
        ],
    }
