"""The week as a linear programme: how many tokens of each model family each plan
serves in each slot of the next seven days, and how many the key takes.

Slots are an hour long for the first day (where the plan acts) and three hours after
(where it only has to keep room). Variables: ``x[slot, family, plan]`` tokens served
by a plan, ``y[slot, family]`` tokens on the key. Every slot's forecast demand is
served by someone; each window period of each plan serves at most what it has left
(the current period) or its capacity (later ones), counting the families it counts.
The objective is the key's price of what it takes. Two terms far smaller than any
price break the ties the week leaves open: serving an agent's forecast on the plan it
is on earns ``STAY`` (a plan's flow is ``x + z``, where ``z[slot, family, plan]`` is
bounded by the demand of the agents already there), so nothing moves that the week
does not need moved; and a plan whose weekly window resets sooner costs a hair less
(``TIE_BREAK``).

Solved by HiGHS (``scipy.optimize.linprog``). An LP, not a MILP: demand is a forecast
of many turns, so fractional flows are what it means; ``assign`` rounds them to agents.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from routing.plan_ahead.inputs import WeekInputs

HORIZON = timedelta(days=7)
FINE = timedelta(hours=1)
FINE_FOR = timedelta(days=1)
COARSE = timedelta(hours=3)
MTOK = 1e6
TIE_BREAK = 1e-8  # $ per Mtok per hour until the weekly window's reset
STAY = 1e-4  # $ per Mtok earned by serving an agent's forecast where it is


@dataclass(frozen=True)
class Flows:
    """The LP's answer: slot boundaries, the families, per slot/family/plan tokens on
    plans and on the key, the demand, and the solve."""

    starts: tuple[datetime, ...]
    ends: tuple[datetime, ...]
    families: tuple[str | None, ...]
    plan_ids: tuple[int, ...]
    on_plans: np.ndarray  # [slot, family, plan] tokens
    on_key: np.ndarray  # [slot, family] tokens
    demand: np.ndarray  # [slot, family] tokens
    key_usd: float
    seconds: float
    status: str


def slots_of(now: datetime) -> tuple[tuple[datetime, ...], tuple[datetime, ...]]:
    """The slots' starts and ends: hourly for ``FINE_FOR``, then ``COARSE``."""
    starts, ends = [], []
    at, end = now, now + HORIZON
    while at < end:
        step = FINE if at - now < FINE_FOR else COARSE
        starts.append(at)
        ends.append(min(at + step, end))
        at = ends[-1]
    return tuple(starts), tuple(ends)


def _demand(inputs: WeekInputs, starts, ends, families) -> tuple[np.ndarray, np.ndarray]:
    """Forecast tokens per slot and family (each agent's hourly profile over the slot),
    and the part of it per plan from the agents already on that plan."""
    plans = {p.id: i for i, p in enumerate(inputs.plans)}
    demand = np.zeros((len(starts), len(families)))
    staying = np.zeros((len(starts), len(families), len(plans)))
    index = {f: i for i, f in enumerate(families)}
    for agent in inputs.agents:
        if not agent.hourly or not any(agent.hourly):
            continue
        f = index[agent.family]
        here = plans.get(agent.assigned) if agent.assigned is not None else None
        for s, (begin, end) in enumerate(zip(starts, ends, strict=True)):
            tokens = agent.at(begin) * ((end - begin) / FINE)
            demand[s, f] += tokens
            if here is not None:
                staying[s, f, here] += tokens
    return demand, staying


def flows_solve(inputs: WeekInputs) -> Flows:
    began = time.process_time()
    starts, ends = slots_of(inputs.now)
    families = tuple(sorted({a.family for a in inputs.agents}, key=lambda f: f or ""))
    plans = inputs.plans
    n_s, n_f, n_p = len(starts), len(families), len(plans)
    demand, staying = _demand(inputs, starts, ends, families)
    n_x = n_s * n_f * n_p
    n_y = n_s * n_f

    def xi(s: int, f: int, p: int) -> int:
        return (s * n_f + f) * n_p + p

    def yi(s: int, f: int) -> int:
        return n_x + s * n_f + f

    n = n_x + n_y + n_x
    cost = np.zeros(n)
    cost[n_x + n_y :] = -STAY
    for f, family in enumerate(families):
        price = inputs.price(family)
        for s in range(n_s):
            cost[yi(s, f)] = price
    rows, cols, vals, upper = [], [], [], []
    row = 0
    for p, plan in enumerate(plans):
        for window in plan.windows:
            counted = [f for f, family in enumerate(families) if window.counts(family)]
            if not counted:
                continue
            periods: dict[int, list[int]] = {}
            for s, begin in enumerate(starts):
                k = (
                    0
                    if begin < window.resets_at
                    else 1 + (begin - window.resets_at) // window.period
                )
                periods.setdefault(k, []).append(s)
                hours_left = max(0.0, (window.resets_at - begin) / FINE) if k == 0 else 0.0
                for f in counted:
                    if window.name == "seven_day":
                        cost[xi(s, f, p)] += TIE_BREAK * hours_left
                        cost[n_x + n_y + xi(s, f, p)] += TIE_BREAK * hours_left
            for k, members in periods.items():
                for s in members:
                    for f in counted:
                        rows += [row, row]
                        cols += [xi(s, f, p), n_x + n_y + xi(s, f, p)]
                        vals += [1.0, 1.0]
                upper.append(max(0.0, window.left if k == 0 else window.capacity) / MTOK)
                row += 1
    # Demand rows: sum over plans + key = demand (as equalities).
    eq_rows, eq_cols, eq_vals, eq_rhs = [], [], [], []
    erow = 0
    for s in range(n_s):
        for f in range(n_f):
            for p in range(n_p):
                eq_rows += [erow, erow]
                eq_cols += [xi(s, f, p), n_x + n_y + xi(s, f, p)]
                eq_vals += [1.0, 1.0]
            eq_rows.append(erow)
            eq_cols.append(yi(s, f))
            eq_vals.append(1.0)
            eq_rhs.append(demand[s, f] / MTOK)
            erow += 1
    bounds = np.zeros((n, 2))
    bounds[:, 1] = np.inf
    bounds[n_x + n_y :, 1] = staying.reshape(-1) / MTOK
    a_ub = coo_matrix((vals, (rows, cols)), shape=(row, n)).tocsr() if row else None
    a_eq = coo_matrix((eq_vals, (eq_rows, eq_cols)), shape=(erow, n)).tocsr()
    result = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.array(upper) if row else None,
        A_eq=a_eq,
        b_eq=np.array(eq_rhs),
        bounds=bounds,
        method="highs",
    )
    if result.status != 0 or result.x is None:
        on_plans = np.zeros((n_s, n_f, n_p))
        on_key = demand.copy()
        status = f"failed: {result.message}"
    else:
        solution = result.x * MTOK
        on_plans = (solution[:n_x] + solution[n_x + n_y :]).reshape(n_s, n_f, n_p)
        on_key = solution[n_x : n_x + n_y].reshape(n_s, n_f)
        status = "optimal"
    key_usd = float(sum(inputs.price(f) * on_key[:, i].sum() for i, f in enumerate(families)))
    return Flows(
        starts=starts,
        ends=ends,
        families=families,
        plan_ids=tuple(p.id for p in plans),
        on_plans=on_plans,
        on_key=on_key,
        demand=demand,
        key_usd=key_usd / MTOK,
        seconds=time.process_time() - began,
        status=status,
    )
