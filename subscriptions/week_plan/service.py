"""The planning task's service: gather, solve, store, once at a time; and the request
for a new plan when a plan or an agent changes.

``week_plan_solve`` runs on a worker (beat every ``EVERY_SECONDS``, and
``DEBOUNCE_SECONDS`` after a change): it claims the solve marker (two workers never
solve at once), gathers each provider's week (``gather.week_inputs_gather``), asks the
solver (``routing.plan_ahead.solve.plan_week``) for each provider that has agents,
and stores the merged plan (``agents/week_plan_store.py``). A failure anywhere logs and
stores nothing: the previous plan stays until it goes stale and turns fall back to
today's rules. No turn waits on any of this.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from agents.models import Agent
from agents.week_plan_store import week_plan_store
from routing.plan_ahead.inputs import WeekInputs
from routing.plan_ahead.week_plan import WeekPlan
from subscriptions.models import Subscription
from subscriptions.week_plan.gather import week_inputs_gather
from trinity.celery import app
from trinity.markers import marker_claim, marker_release

logger = logging.getLogger(__name__)

TASK = "subscriptions.week_plan_solve"
# Beat's cadence: a plan is STALE_AFTER (30 min) old before a turn stops acting on
# it, so a few missed runs cost nothing.
EVERY_SECONDS = 300
# The task's hard limit, and how long the solve marker holds: a claim cannot lapse
# while its solve runs (the hard limit kills it first), so compare-and-release by
# get-then-delete leaves no window.
TIME_LIMIT_SECONDS = 120
SOFT_TIME_LIMIT_SECONDS = 100
SOLVE_MARKER = "week-plan:solve"
SOLVE_TTL_SECONDS = TIME_LIMIT_SECONDS + 10
# Changes within this long of the first are planned together: the first claims the
# request marker and enqueues the task this long later, the others find it held.
DEBOUNCE_SECONDS = 30
REQUEST_MARKER = "week-plan:requested"

Solver = Callable[[WeekInputs], WeekPlan]


@dataclass(frozen=True, slots=True)
class SolveReport:
    """What one run did: ``status`` is ``solved`` (stored), ``busy`` (another run holds
    the marker), ``unreachable`` (the cache did not answer: nothing can be stored),
    ``failed`` (gather or solve raised: logged, nothing stored) or ``unstored`` (solved,
    the store did not answer); ``plan`` the solver's status when solved."""

    status: str
    plans: int = 0
    agents: int = 0
    seconds: float = 0.0
    plan: str = ""


def _plan_week() -> Solver:
    """The solver. SciPy loads here (0.4 s), in the worker that solves, not in every
    process that loads the app (the web, the gateway)."""
    from routing.plan_ahead.solve import plan_week

    return plan_week


def week_plan_solve(*, now: datetime, solver: Solver | None = None) -> SolveReport:
    """Plan the week from what is known at ``now`` and store the plan, unless another
    run holds the solve marker. Never raises: a failure is logged and reported, and
    the previous plan stays (it goes stale; turns then fall back)."""
    claim = secrets.token_hex(8)
    held = marker_claim(SOLVE_MARKER, ttl=SOLVE_TTL_SECONDS, value=claim)
    if held is None:
        logger.warning("week plan: cache unreachable, not planned")
        return SolveReport("unreachable")
    if not held:
        return SolveReport("busy")
    solve = solver or _plan_week()
    started = time.perf_counter()
    try:
        weeks = week_inputs_gather(now=now)
        plan = week_plans_merge(
            [solve(inputs) for inputs in weeks.values() if inputs.agents], now=now
        )
    except Exception:  # noqa: BLE001 - any failure keeps the previous plan
        logger.exception("week plan: planning failed; the previous plan stays until stale")
        return SolveReport("failed", seconds=time.perf_counter() - started)
    finally:
        marker_release(SOLVE_MARKER, value=claim)
    stored = week_plan_store(plan)
    report = SolveReport(
        "solved" if stored else "unstored",
        plans=sum(len(w.plans) for w in weeks.values()),
        agents=sum(len(w.agents) for w in weeks.values()),
        seconds=time.perf_counter() - started,
        plan=plan.status,
    )
    logger.info(
        "week plan: %d plans, %d agents, %.3f s (solver %.3f s), %s, %s",
        report.plans,
        report.agents,
        report.seconds,
        plan.solve_seconds,
        plan.status,
        report.status,
    )
    return report


def week_plans_merge(plans: Sequence[WeekPlan], *, now: datetime) -> WeekPlan:
    """One plan of each provider's (their agents and plans are disjoint) made at ``now``;
    with none (no agents), an empty plan, so the panel says when it last looked."""
    statuses = list(dict.fromkeys(p.status for p in plans))
    return WeekPlan(
        made_at=now,
        placements=tuple(entry for p in plans for entry in p.placements),
        reserves={pk: v for p in plans for pk, v in p.reserves.items()},
        spill=tuple(s for p in plans for s in p.spill),
        key_usd=sum(p.key_usd for p in plans),
        demand_mtok=sum(p.demand_mtok for p in plans),
        solve_seconds=sum(p.solve_seconds for p in plans),
        status="+".join(statuses) if statuses else "empty",
    )


# Asking for a new plan when what it was made from changes


def week_plan_requested() -> None:
    """Once the surrounding transaction commits, ask for a new plan within
    ``DEBOUNCE_SECONDS`` (the first request of a burst enqueues it, the rest are in
    it). A cache or broker that does not answer costs only the wait for beat."""
    transaction.on_commit(_request)


def _request() -> None:
    if app.conf.task_always_eager:
        # Tasks run inline (tests, a shell): a request is for later by design, and
        # solving inside the write that asked would plan the next turns mid-test.
        return
    if not marker_claim(REQUEST_MARKER, ttl=DEBOUNCE_SECONDS):
        return  # held: a run is already on its way (or the cache is down: beat plans)
    try:
        app.send_task(TASK, countdown=DEBOUNCE_SECONDS, expires=EVERY_SECONDS)
    except Exception:  # noqa: BLE001 - a broker outage must not fail the write
        logger.warning("week plan: request not enqueued (broker); beat plans next")
        marker_release(REQUEST_MARKER)


# What a change is, for each model (``SubscriptionsConfig.ready`` connects these).
SUBSCRIPTION_FIELDS = frozenset({"provider", "plan_type", "paused_at"})
AGENT_FIELDS = frozenset({"subscription", "subscription_id", "runtime", "model"})


def _changed(created: bool, update_fields: Any, fields: frozenset[str]) -> bool:
    return created or update_fields is None or bool(fields & set(update_fields))


def subscription_saved(
    sender: type[Subscription], *, created: bool, update_fields: Any = None, **_: Any
) -> None:
    if _changed(created, update_fields, SUBSCRIPTION_FIELDS):
        week_plan_requested()


def agent_saved(sender: type[Agent], *, created: bool, update_fields: Any = None, **_: Any) -> None:
    if _changed(created, update_fields, AGENT_FIELDS):
        week_plan_requested()


def row_deleted(sender: type[Any], **_: Any) -> None:
    week_plan_requested()
