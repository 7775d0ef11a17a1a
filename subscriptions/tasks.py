"""Celery adapters: load by id, call one service, own retry and time limits."""

from __future__ import annotations

import logging

from celery import shared_task

from subscriptions.headroom import (
    first_look,  # noqa: F401 - registers its task here
    rebalance,
    sampler,
)
from subscriptions.services import rate_limit_events_cleanup
from subscriptions.week_plan import service as week_plan
from trinity import clock

logger = logging.getLogger(__name__)


@shared_task(name="subscriptions.cleanup_old_rate_limit_events", soft_time_limit=60, time_limit=90)
def cleanup_old_rate_limit_events() -> int:
    deleted = rate_limit_events_cleanup(now=clock.now())
    logger.info("deleted %d rate-limit events past retention", deleted)
    return deleted


# Limits from the sampler's one bound: a sweep never starts a probe it could not
# finish and store before its own end, so the soft limit, past that end, fires only
# for a hung store, and every reading taken before it is already stored.
_SWEEP_BOUNDS = sampler.configured_bounds()


@shared_task(
    name="subscriptions.headroom_sweep",
    soft_time_limit=_SWEEP_BOUNDS.soft_time_limit,
    time_limit=_SWEEP_BOUNDS.time_limit,
)
def sweep_headroom() -> dict[str, object]:
    report = sampler.headroom_sweep(clock=clock.now)
    # The balanced strategy's moves, on what this sweep stored, by its leader only.
    moved = 0 if report.skipped else len(rebalance.assignments_rebalance(now=clock.now()).moved)
    return {
        "skipped": report.skipped,
        "due": report.due,
        "probed": report.probed,
        "rebalanced": moved,
    }


@shared_task(name="subscriptions.headroom_history_prune", soft_time_limit=120, time_limit=180)
def prune_headroom_history() -> int:
    deleted = sampler.headroom_history_prune(now=clock.now())
    logger.info("deleted %d headroom samples past retention", deleted)
    return deleted


@shared_task(
    name=week_plan.TASK,
    soft_time_limit=week_plan.SOFT_TIME_LIMIT_SECONDS,
    time_limit=week_plan.TIME_LIMIT_SECONDS,
)
def solve_week_plan() -> dict[str, object]:
    report = week_plan.week_plan_solve(now=clock.now())
    return {
        "status": report.status,
        "plans": report.plans,
        "agents": report.agents,
        "seconds": round(report.seconds, 3),
        "plan": report.plan,
    }
