"""``plan_week``: the week plan from what is known now (``inputs.WeekInputs``).

The LP (``flows``) says how much of each family each plan and the key should serve in
each slot of the week; ``assign`` rounds the first day to one place per agent; here
each agent's entry gets its words, each plan its reserve and the key its spill.
"""

from __future__ import annotations

import time
from datetime import timedelta

from routing.plan_ahead.assign import KEY_PLACE, routes_of, spill_ranges
from routing.plan_ahead.flows import MTOK, Flows, flows_solve
from routing.plan_ahead.inputs import PlanState, WeekInputs
from routing.plan_ahead.week_plan import KEY, PLAN, Planned, Spill, WeekPlan

# The reserve: what a plan keeps of its weekly window for demand after this long.
RESERVE_AFTER = timedelta(hours=5)


def plan_week(inputs: WeekInputs) -> WeekPlan:
    began = time.process_time()
    flows = flows_solve(inputs)
    plans = {p.id: p for p in inputs.plans}
    total = float(flows.demand.sum())
    over = float(flows.on_key.sum()) / total if total > 0 else 0.0
    placements = tuple(
        _entry(
            route.agent.id,
            route.place,
            route.until,
            route.agent.assigned,
            plans,
            over,
            inputs,
            flows,
        )
        for route in routes_of(flows, inputs.agents)
    )
    return WeekPlan(
        made_at=inputs.now,
        placements=placements,
        reserves={p.id: _reserve(p, flows, inputs) for p in inputs.plans},
        spill=tuple(
            Spill(
                flows.families[f],
                flows.starts[a],
                flows.ends[b],
                float(flows.on_key[a : b + 1, f].sum()),
            )
            for f, a, b in spill_ranges(flows)
        ),
        key_usd=flows.key_usd,
        demand_mtok=total / MTOK,
        solve_seconds=time.process_time() - began,
        status=flows.status,
    )


def _entry(agent_id, place, until, assigned, plans, over, inputs, flows: Flows) -> Planned:
    if place == KEY_PLACE:
        family = next(a.family for a in inputs.agents if a.id == agent_id)
        because = (
            f"the week's forecast demand is {over:.0%} more than the plans can serve, "
            f"and the key takes the cheapest turns ({family or 'its model'} ones) so "
            f"the plans keep room for dearer ones"
        )
        return Planned(agent_id, KEY, None, "platform key", until, because, inputs.now)
    plan = plans[place]
    weekly = next((w for w in plan.windows if w.name == "seven_day"), None)
    if place == assigned:
        because = f"{plan.name} has room planned for this agent's forecast"
    elif weekly is not None:
        left = 100.0 * weekly.left / weekly.capacity if weekly.capacity else 0.0
        because = (
            f"{plan.name} has {left:.0f} % of its week left until "
            f"{weekly.resets_at:%a %H:%M} UTC, and the week plan spends it before it resets"
        )
    else:
        because = f"{plan.name} has room planned for this agent's forecast"
    return Planned(agent_id, PLAN, place, plan.name, until, because, inputs.now)


def _reserve(plan: PlanState, flows: Flows, inputs: WeekInputs) -> float:
    """Percent of the plan's current weekly window planned for after ``RESERVE_AFTER``."""
    weekly = next((w for w in plan.windows if w.name == "seven_day"), None)
    if weekly is None or weekly.capacity <= 0:
        return 0.0
    p = flows.plan_ids.index(plan.id)
    later = sum(
        float(flows.on_plans[s, :, p].sum())
        for s, begin in enumerate(flows.starts)
        if begin >= inputs.now + RESERVE_AFTER and begin < weekly.resets_at
    )
    return 100.0 * later / weekly.capacity
