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
SKIPPED: frozenset[str] = frozenset()
SOONER = 0.02  # what a key token planned now costs more than one planned last


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


@dataclass(frozen=True)
class _Shape:
    """The LP's sizes and where each variable sits: ``x`` (slot, family, plan) first,
    then ``y`` (slot, family), then ``z`` (as ``x``)."""

    slots: int
    families: int
    plans: int

    @property
    def n_x(self) -> int:
        return self.slots * self.families * self.plans

    @property
    def n_y(self) -> int:
        return self.slots * self.families

    @property
    def size(self) -> int:
        return 2 * self.n_x + self.n_y

    def x(self, s: int, f: int, p: int) -> int:
        return (s * self.families + f) * self.plans + p

    def y(self, s: int, f: int) -> int:
        return self.n_x + s * self.families + f

    def z(self, s: int, f: int, p: int) -> int:
        return self.n_x + self.n_y + self.x(s, f, p)


def _costs(inputs: WeekInputs, shape: _Shape, families) -> np.ndarray:
    """The key's price per family (a little dearer the sooner), ``STAY`` earned."""
    cost = np.zeros(shape.size)
    cost[shape.n_x + shape.n_y :] = -STAY
    for f, family in enumerate(families):
        price = inputs.price(family)
        for s in range(shape.slots):
            # The key's tokens cost a little more the sooner they are planned: of two
            # weeks that spill the same, the one that spills last, when more is known.
            cost[shape.y(s, f)] = price * (1 + SOONER * (shape.slots - s) / shape.slots)
    return cost


def _window_rows(inputs: WeekInputs, shape: _Shape, starts, families, cost: np.ndarray):
    """One row per window period of each plan: its flows at most what it has left
    (the current period) or its capacity (later ones). Adds the reset tie-break to
    ``cost``."""
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    upper: list[float] = []
    for p, plan in enumerate(inputs.plans):
        for window in plan.windows:
            counted = [f for f, family in enumerate(families) if window.counts(family)]
            if not counted or window.name in SKIPPED:
                continue
            periods: dict[int, list[int]] = {}
            for s, begin in enumerate(starts):
                k = (
                    0
                    if begin < window.resets_at
                    else 1 + (begin - window.resets_at) // window.period
                )
                periods.setdefault(k, []).append(s)
                if window.name == "seven_day" and k == 0:
                    hours_left = (window.resets_at - begin) / FINE
                    for f in counted:
                        cost[shape.x(s, f, p)] += TIE_BREAK * hours_left
                        cost[shape.z(s, f, p)] += TIE_BREAK * hours_left
            for k, members in periods.items():
                row = len(upper)
                for s in members:
                    for f in counted:
                        rows += [row, row]
                        cols += [shape.x(s, f, p), shape.z(s, f, p)]
                        vals += [1.0, 1.0]
                upper.append(max(0.0, window.left if k == 0 else window.capacity) / MTOK)
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(upper), shape.size)).tocsr()
    return matrix, np.array(upper)


def _demand_rows(shape: _Shape, demand: np.ndarray):
    """Per slot and family: plans and the key serve the forecast, exactly."""
    rows, cols = [], []
    for s in range(shape.slots):
        for f in range(shape.families):
            row = s * shape.families + f
            for p in range(shape.plans):
                rows += [row, row]
                cols += [shape.x(s, f, p), shape.z(s, f, p)]
            rows.append(row)
            cols.append(shape.y(s, f))
    matrix = coo_matrix(([1.0] * len(rows), (rows, cols)), shape=(shape.n_y, shape.size))
    return matrix.tocsr(), demand.reshape(-1) / MTOK


def flows_solve(inputs: WeekInputs) -> Flows:
    began = time.process_time()
    starts, ends = slots_of(inputs.now)
    families = tuple(sorted({a.family for a in inputs.agents}, key=lambda f: f or ""))
    shape = _Shape(len(starts), len(families), len(inputs.plans))
    demand, staying = _demand(inputs, starts, ends, families)
    cost = _costs(inputs, shape, families)
    a_ub, b_ub = _window_rows(inputs, shape, starts, families, cost)
    a_eq, b_eq = _demand_rows(shape, demand)
    bounds = np.zeros((shape.size, 2))
    bounds[:, 1] = np.inf
    bounds[shape.n_x + shape.n_y :, 1] = staying.reshape(-1) / MTOK
    result = linprog(
        cost,
        A_ub=a_ub if b_ub.size else None,
        b_ub=b_ub if b_ub.size else None,
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=bounds,
        method="highs",
    )
    on_plans, on_key, status = _answer(result, shape, demand)
    key_usd = sum(inputs.price(f) * float(on_key[:, i].sum()) for i, f in enumerate(families))
    return Flows(
        starts=starts,
        ends=ends,
        families=families,
        plan_ids=tuple(p.id for p in inputs.plans),
        on_plans=on_plans,
        on_key=on_key,
        demand=demand,
        key_usd=key_usd / MTOK,
        seconds=time.process_time() - began,
        status=status,
    )


def _answer(result, shape: _Shape, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """Tokens on plans and on the key; a failed solve plans everything on the key
    (the turns then keep today's rules: nobody is moved by a plan that failed)."""
    dims = (shape.slots, shape.families, shape.plans)
    if result.status != 0 or result.x is None:
        return np.zeros(dims), demand.copy(), f"failed: {result.message}"
    solution = result.x * MTOK
    on_plans = solution[: shape.n_x] + solution[shape.n_x + shape.n_y :]
    on_key = solution[shape.n_x : shape.n_x + shape.n_y]
    return on_plans.reshape(dims), on_key.reshape(dims[:2]), "optimal"
