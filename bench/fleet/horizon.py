"""A clairvoyant schedule planned by an LP over the whole trace, replayed through ``World``.

The plan. Requests are pooled per (cell, model family) as the bound pools them
(``bench.fleet.cells``), each counted (``Fleet.counted``) and billed as it would be
if its session stayed on one rung: warm when the session's previous request came
within the cache's TTL, else written (``staying_warm``). ``X[g, s]`` is how much of group g plan s
serves; each window period W may count at most what it has left (``left(W)``, no
crossing allowance: the real windows let one request over, which the replay gets
for free); maximise the key's $ kept off it, each group's tokens valued at its own
$ per counted token. HiGHS solves it in seconds (``scipy.optimize.linprog``).

The replay. Requests go through a fresh ``World`` in time order. Each (plan,
family) holds a budget: what the plan allocated it in the cells so far less what it
served, reset when the plan's 7d window resets. A request goes to a plan that the
simulator admits now (so nothing is refused) and has budget for its family: the
plan its session's prefix is warm on first (no rebuild; it may then spend the other
plans' budget for the family), else the plan with the most budget; failing all,
the key. The LP decides which requests the key takes
(the cheapest per token, where plans run short), the budgets carry that decision
into whole requests, and the world's accounting decides what was served, so the
key $ is what one real policy would pay.

``horizon`` re-plans: every ``horizon`` seconds the LP is solved again over the
rest of the trace from what the world's windows have left then, so the plan
follows where the replay drifted (a window that went over, a 5h window that ran
short on lumpy requests).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_array

from bench.fleet.achievable import Achievable
from bench.fleet.cache import TTL_SECONDS
from bench.fleet.cells import (
    Cells,
    FlatRequest,
    cells_of,
    period_of,
    requests_of,
    usable,
    windows_for,
)
from bench.fleet.trace import Trace
from bench.fleet.world import World, from_unix, to_unix

Group = tuple[int, str | None]  # (cell, model family)
WindowKey = tuple[int, str, int]  # (plan index, window name, period)
Allocation = dict[tuple[int, str | None, int], float]  # (cell, family, plan) -> tokens


@dataclass(frozen=True)
class _Demand:
    """Per group, tokens counted warm and what the key bills for them warm ($)."""

    tokens: dict[Group, int]
    usd: dict[Group, float]


def staying_warm(requests: list[FlatRequest]) -> list[bool]:
    """Per request, whether its prefix is warm if every session stays where it is:
    its session's previous request came at most the cache's TTL before it (a request
    without a session reads what it names as cached)."""
    last: dict[str, float] = {}
    warm = []
    for request in requests:
        at = to_unix(request.at)
        if request.session is None:
            warm.append(True)
            continue
        before = last.get(request.session)
        warm.append(before is not None and at - before <= TTL_SECONDS)
        last[request.session] = at
    return warm


def _demand(
    trace: Trace, requests: list[FlatRequest], warm: list[bool], cells: Cells, since: float
) -> _Demand:
    tokens: dict[Group, int] = defaultdict(int)
    usd: dict[Group, float] = defaultdict(float)
    for request, hot in zip(requests, warm, strict=True):
        if to_unix(request.at) < since:
            continue
        group = (cells.of(request.at), request.family)
        tokens[group] += request.counted(trace.fleet, warm=hot)
        usd[group] += request.key_usd(trace.fleet, warm=hot)
    return _Demand(dict(tokens), dict(usd))


def _room(world: World, s: int, key: WindowKey, now: float) -> int:
    """What window period ``key`` can still count, seen from the world at ``now``: the
    window in force has its capacity less its use, a later period all of it."""
    _, name, period = key
    spec = world.fleet.subscriptions[s]
    window = world.subscriptions[s + 1].credential.windows[name]
    window.roll(now)
    if period > period_of(spec, name, now):
        return window.capacity
    return max(0, window.capacity - window.used)


def _columns(trace: Trace, world: World, cells: Cells, demand: _Demand, now: float):
    """The LP's columns (a group on a plan that may serve it), their value per token,
    their bounds, and which window periods and groups each belongs to."""
    columns: list[tuple[Group, int]] = []
    cost: list[float] = []
    upper: list[float] = []
    members: dict[WindowKey, list[int]] = defaultdict(list)
    by_group: dict[Group, list[int]] = defaultdict(list)
    for group in sorted(demand.tokens, key=lambda g: (g[0], str(g[1]))):
        cell, family = group
        tokens = demand.tokens[group]
        if tokens <= 0:
            continue
        at = max(cells.middle(cell), now)
        rate = demand.usd[group] / tokens
        for s, spec in enumerate(trace.fleet.subscriptions):
            if not usable(spec, from_unix(at)):
                continue
            keys = [
                (s, w, period_of(spec, w, at)) for w in windows_for(family) if w in spec.windows
            ]
            if any(k[2] < 0 or _room(world, s, k, now) <= 0 for k in keys):
                continue
            col = len(columns)
            columns.append((group, s))
            cost.append(-rate)
            upper.append(float(tokens))
            by_group[group].append(col)
            for key in keys:
                members[key].append(col)
    return columns, cost, upper, members, by_group


def allocation(trace: Trace, world: World, cells: Cells, demand: _Demand, now: float) -> Allocation:
    """The LP's plan from ``now`` on: tokens of each group each plan serves."""
    columns, cost, upper, members, by_group = _columns(trace, world, cells, demand, now)
    if not columns:
        return {}
    rows: list[int] = []
    cols: list[int] = []
    rhs: list[float] = []
    for key in sorted(members):
        room = _room(world, key[0], key, now)
        if sum(upper[c] for c in members[key]) <= room:
            continue
        rows.extend([len(rhs)] * len(members[key]))
        cols.extend(members[key])
        rhs.append(float(room))
    for group, group_cols in by_group.items():
        if len(group_cols) > 1:
            rows.extend([len(rhs)] * len(group_cols))
            cols.extend(group_cols)
            rhs.append(float(demand.tokens[group]))
    # Mtok units keep HiGHS' tolerances meaningful.
    scale = 1e-6
    bounds = np.column_stack([np.zeros(len(columns)), np.array(upper) * scale])
    if rhs:
        matrix = coo_array(
            (np.ones(len(rows)), (rows, cols)), shape=(len(rhs), len(columns))
        ).tocsr()
        result = linprog(
            np.array(cost) / scale,
            A_ub=matrix,
            b_ub=np.array(rhs) * scale,
            bounds=bounds,
            method="highs",
        )
        if result.status != 0:
            raise RuntimeError(f"the plan LP failed: {result.message}")
        x = result.x / scale
    else:
        x = np.array(upper)
    return {
        (group[0], group[1], s): float(v)
        for (group, s), v in zip(columns, x, strict=True)
        if v > 0.5
    }


def _week(trace: Trace, s: int, at: float) -> int:
    spec = trace.fleet.subscriptions[s]
    return period_of(spec, "seven_day", at) if "seven_day" in spec.windows else 0


def _advance(
    trace: Trace,
    cells: Cells,
    plan: Allocation,
    budget: dict[tuple[int, str | None], float],
    week: dict[int, int],
    cell: int,
    here: int,
) -> int:
    """Add each plan's allotment of the cells up to ``here`` to its budgets (zeroed
    when its weekly window resets); returns the cell reached."""
    while cell < here:
        cell += 1
        middle = cells.middle(cell)
        for s in week:
            if _week(trace, s, middle) != week[s]:
                week[s] = _week(trace, s, middle)
                for key in [k for k in budget if k[0] == s]:
                    budget[key] = 0.0
            for family in ("opus", "sonnet", "haiku", None):
                budget[(s, family)] += plan.get((cell, family, s), 0.0)
    return cell


def horizon_replay(trace: Trace, *, horizon: float | None = None) -> Achievable:
    """Plan with the LP (again every ``horizon`` seconds; None: once), replay through a
    fresh ``World``; raises RuntimeError on a refusal (asking first rules it out)."""
    began = time.perf_counter()
    world = World(trace.fleet)
    fleet = trace.fleet
    requests = requests_of(trace)
    cells = cells_of(trace)
    start = to_unix(fleet.start)
    warm = staying_warm(requests)
    plan = allocation(trace, world, cells, _demand(trace, requests, warm, cells, start), start)
    planned_at = start
    budget: dict[tuple[int, str | None], float] = defaultdict(float)
    week = {s: _week(trace, s, start) for s in range(len(fleet.subscriptions))}
    cell = -1
    curve = [(fleet.start, 0.0)]
    schedule: list[int | None] = []
    for request in requests:
        now = world.now(request.at)
        if horizon is not None and now - planned_at >= horizon:
            demand = _demand(trace, requests, warm, cells, now)
            plan = allocation(trace, world, cells, demand, now)
            planned_at = now
            budget.clear()
            cell = cells.of(request.at) - 1
        cell = _advance(trace, cells, plan, budget, week, cell, cells.of(request.at))
        s = _choose(world, trace, request, budget)
        schedule.append(s)
        rung = world.key_rung if s is None else world.subscriptions[s + 1].rung
        hot = world.cache.warm(request.session, None if s is None else s + 1, now)
        before = world.key_usd
        outcome = world.attempt(
            rung,
            model=request.model,
            tokens=request.tokens,
            at=request.at,
            cached=request.cached,
            session=request.session,
        )
        if not outcome.ok:
            raise RuntimeError(f"the schedule was refused at {request.at}: {outcome.detail}")
        if s is None:
            if world.key_usd != before:
                curve.append((request.at, world.key_usd))
        else:
            _spend(
                budget,
                s,
                request.family,
                request.counted(fleet, warm=hot),
                share=bool(request.cached),
            )
    curve.append((fleet.end, world.key_usd))
    return Achievable(world.key_usd, tuple(curve), time.perf_counter() - began, tuple(schedule))


def _choose(
    world: World,
    trace: Trace,
    request: FlatRequest,
    budget: dict[tuple[int, str | None], float],
) -> int | None:
    """The plan (fleet index) for ``request``, one the simulator admits now: the plan
    its session's prefix is warm on while the plans have budget for its family
    between them, else the plan with the most budget for it. None: the key."""
    now = to_unix(request.at)
    family = request.family
    total = sum(left for (_, f), left in budget.items() if f == family and left > 0)
    best: tuple[bool, float, int] | None = None
    for s, spec in enumerate(trace.fleet.subscriptions):
        left = budget.get((s, family), 0.0)
        warm = bool(request.cached) and world.cache.warm(request.session, s + 1, now)
        if (left <= 0 and not (warm and total > 0)) or not usable(spec, request.at):
            continue
        credential = world.subscriptions[s + 1].credential
        if not world.sim.check_quota(credential, request.model).allowed:
            continue
        rank = (warm, left, -s)
        if best is None or rank > best:
            best = rank
    return None if best is None else -best[2]


def _spend(
    budget: dict[tuple[int, str | None], float],
    s: int,
    family: str | None,
    tokens: int,
    *,
    share: bool,
) -> None:
    """Take ``tokens`` off plan ``s``'s budget for ``family``; with ``share`` (a
    request with a prefix, which ``_choose`` keeps on its warm plan while any plan has
    budget), what it lacks comes off the other plans'."""
    budget[(s, family)] -= tokens
    if not share:
        return
    others = sorted(
        ((left, o) for (o, f), left in budget.items() if f == family and o != s and left > 0),
        reverse=True,
    )
    for left, o in others:
        if budget[(s, family)] >= 0:
            break
        take = min(left, -budget[(s, family)])
        budget[(o, family)] -= take
        budget[(s, family)] += take
