"""Builders for the week plan's tests: served turns, and plans made by hand."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from agents.models import Agent
from execution.models import Execution
from routing.plan_ahead.week_plan import KEY, PLAN, Planned, Spill, WeekPlan
from subscriptions.models import Subscription
from tests.headroom.readings import T0


def turn(
    agent: Agent,
    *,
    at: datetime,
    tokens: int = 1000,
    served_by: Subscription | None = None,
    key: bool = False,
    cost_usd: str | None = None,
    model: str = "",
) -> Execution:
    """A succeeded turn of ``agent`` at ``at`` of ``tokens`` (nine in ten input), served
    by ``served_by``'s plan or the key."""
    return Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        message="m",
        status="succeeded",
        model=model,
        served_by_kind="api_key" if key else "subscription",
        served_by_subscription=served_by,
        input_tokens=tokens - tokens // 10,
        output_tokens=tokens // 10,
        cost_usd=Decimal(cost_usd) if cost_usd is not None else None,
        created_at=at,
    )


def planned(
    agent_id: int,
    *,
    name: str = "max-b",
    subscription_id: int | None = 7,
    until: timedelta = timedelta(days=2),
    made_at: datetime = T0,
    because: str = "its weekly window resets first",
) -> Planned:
    return Planned(
        agent_id=agent_id,
        kind=PLAN if subscription_id is not None else KEY,
        subscription_id=subscription_id,
        name=name,
        until=made_at + until,
        because=because,
        made_at=made_at,
    )


def week_plan(
    *entries: Planned, made_at: datetime = T0, reserves: dict[int, float] | None = None
) -> WeekPlan:
    return WeekPlan(
        made_at=made_at,
        placements=entries,
        reserves=reserves if reserves is not None else {7: 25.0},
        spill=(Spill("opus", made_at + timedelta(days=5), made_at + timedelta(days=6), 1.5e6),),
        key_usd=37.5,
        demand_mtok=120.0,
        solve_seconds=0.04,
        status="optimal",
    )
