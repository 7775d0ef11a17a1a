"""A clairvoyant schedule planned by an LP over the whole trace, replayed through ``World``.

The plan. The requests are taken in chains (``cells.chains_of``): a session's run of
requests each within the cache's TTL of the one before, its first written (a cold
prefix wherever it goes) and the rest read if they stay on its rung. A chain's rate
is its key $ per token it counts so; requests are pooled per (cell, model family,
rate class of their chain) (``cells.rate_class``), a chain whole in the cell of its
first request. ``X[g, s]`` is how much of group g plan s serves; each window period
W may count at most what it has left (``left(W)``, no crossing allowance: the real
windows let one request over, which the replay gets for free); maximise the key's $
kept off it, each group's tokens valued at their own $ per counted token. HiGHS
solves it in seconds (``scipy.optimize.linprog``).

The replay. Requests go through a fresh ``World`` in time order. Each (plan,
family) holds a budget per rate class: what the plan was allotted in the cells so
far less what it served, zeroed when the plan's 7d window resets. A chain goes
where its first request goes: to a plan that the simulator admits now (so nothing
is refused) with the most budget for its family in classes up to its own (a dearer
chain may take what was planned for cheaper ones), else the key; the rest of the
chain follows it, warm, while that plan admits them (a chain on the key stays
there), and moves as its first did when the plan refuses. A served request spends
the cheapest classes first. The LP decides which chains the key takes (the cheapest
per token, where plans run short), the budgets carry that decision into whole
chains, and the world's accounting decides what was served, so the key $ is what
one real policy would pay.

``horizon`` re-plans: every ``horizon`` seconds the LP is solved again over the
rest of the trace from what the world's windows have left then, so the plan
follows where the replay drifted (a window that went over, a 5h window that ran
short on lumpy requests).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_array

from bench.fleet.achievable import Achievable, schedule_send
from bench.fleet.cells import (
    Cells,
    FlatRequest,
    cells_of,
    chains_of,
    may_be_warm,
    period_of,
    rate_class,
    requests_of,
    usable,
    windows_for,
)
from bench.fleet.trace import Trace
from bench.fleet.world import World, from_unix, to_unix

Group = tuple[int, str | None, int]  # (cell, model family, rate class)
WindowKey = tuple[int, str, int]  # (plan index, window name, period)
Allocation = dict[tuple[Group, int], float]  # (group, plan) -> tokens
Budget = dict[tuple[int, str | None], dict[int, float]]  # (plan, family) -> class -> tokens


@dataclass(frozen=True)
class _Chains:
    """The trace's requests as chains (``cells.chains_of``): per request its chain's
    first request and, per chain, its rate class: the key $ of the whole chain per
    token it counts, its first request written and the rest read."""

    head: list[int]
    rate: dict[int, int]

    @classmethod
    def of(cls, trace: Trace, requests: list[FlatRequest], warm: list[bool]) -> _Chains:
        head = chains_of(requests, warm)
        usd: dict[int, float] = defaultdict(float)
        counted: dict[int, int] = defaultdict(int)
        for request, hot, first in zip(requests, warm, head, strict=True):
            usd[first] += request.key_usd(trace.fleet, warm=hot) * 1e6
            counted[first] += request.counted(trace.fleet, warm=hot)
        return cls(head, {first: rate_class(usd[first], counted[first]) for first in usd})


@dataclass(frozen=True)
class _Demand:
    """Per group, tokens counted and what the key bills for them ($), each chain
    whole in the cell of its first request."""

    tokens: dict[Group, int]
    usd: dict[Group, float]


def _demand(
    trace: Trace,
    requests: list[FlatRequest],
    warm: list[bool],
    chains: _Chains,
    cells: Cells,
    since: float,
) -> _Demand:
    tokens: dict[Group, int] = defaultdict(int)
    usd: dict[Group, float] = defaultdict(float)
    for request, hot, first in zip(requests, warm, chains.head, strict=True):
        if to_unix(request.at) < since:
            continue
        group = (cells.of(requests[first].at), request.family, chains.rate[first])
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
    for group in sorted(demand.tokens, key=lambda g: (g[0], str(g[1]), g[2])):
        cell, family, _ = group
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
    return {(group, s): float(v) for (group, s), v in zip(columns, x, strict=True) if v > 0.5}


def _week(trace: Trace, s: int, at: float) -> int:
    spec = trace.fleet.subscriptions[s]
    return period_of(spec, "seven_day", at) if "seven_day" in spec.windows else 0


def _advance(
    trace: Trace,
    cells: Cells,
    plan: dict[int, list[tuple[Group, int, float]]],
    budget: Budget,
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
                    budget[key].clear()
        for (_, family, rate), s, tokens in plan.get(cell, ()):
            classes = budget.setdefault((s, family), {})
            classes[rate] = classes.get(rate, 0.0) + tokens
    return cell


def _by_cell(plan: Allocation) -> dict[int, list[tuple[Group, int, float]]]:
    cells: dict[int, list[tuple[Group, int, float]]] = defaultdict(list)
    for (group, s), tokens in sorted(plan.items(), key=lambda item: (item[0][0][0], item[0][1])):
        cells[group[0]].append((group, s, tokens))
    return cells


@dataclass
class _Replay:
    """The replay under way: the world, the LP's plan by cell, the budgets, and where
    each chain was sent (a fleet index; None: the key)."""

    trace: Trace
    world: World
    cells: Cells
    chains: _Chains
    plan: dict[int, list[tuple[Group, int, float]]]
    budget: Budget
    week: dict[int, int]
    cell: int = -1
    placed: dict[int, int | None] = field(default_factory=dict)

    def replan(self, requests: list[FlatRequest], warm: list[bool], now: float) -> None:
        demand = _demand(self.trace, requests, warm, self.chains, self.cells, now)
        self.plan = _by_cell(allocation(self.trace, self.world, self.cells, demand, now))
        self.budget.clear()
        self.cell = self.cells.of(from_unix(now)) - 1

    def place(self, index: int, request: FlatRequest) -> int | None:
        """Where ``request`` goes: where its chain went while that plan admits it
        (its prefix is warm there), else a plan with budget for its chain's class
        (``_choose``), else the key; the chain follows it from then on."""
        self.cell = _advance(
            self.trace,
            self.cells,
            self.plan,
            self.budget,
            self.week,
            self.cell,
            self.cells.of(request.at),
        )
        first = self.chains.head[index]
        if first in self.placed:
            s = self.placed[first]
            if s is None or _admits(self.world, self.trace, request, s):
                return s
        s = _choose(self.world, self.trace, request, self.budget, self.chains.rate[first])
        self.placed[first] = s
        return s


def horizon_replay(trace: Trace, *, horizon: float | None = None) -> Achievable:
    """Plan with the LP (again every ``horizon`` seconds; None: once), replay through a
    fresh ``World``; raises RuntimeError on a refusal (asking first rules it out)."""
    began = time.perf_counter()
    fleet = trace.fleet
    requests = requests_of(trace)
    warm = may_be_warm(requests)
    start = to_unix(fleet.start)
    weeks = {s: _week(trace, s, start) for s in range(len(fleet.subscriptions))}
    replay = _Replay(
        trace, World(fleet), cells_of(trace), _Chains.of(trace, requests, warm), {}, {}, weeks
    )
    replay.replan(requests, warm, start)
    world, planned_at = replay.world, start
    curve = [(fleet.start, 0.0)]
    schedule: list[int | None] = []
    for index, request in enumerate(requests):
        now = world.now(request.at)
        if horizon is not None and now - planned_at >= horizon:
            replay.replan(requests, warm, now)
            planned_at = now
        s = replay.place(index, request)
        schedule.append(s)
        hot = world.cache.warm(request.session, None if s is None else s + 1, now)
        before = world.key_usd
        schedule_send(world, request, s)
        if s is None:
            if world.key_usd != before:
                curve.append((request.at, world.key_usd))
        else:
            counted = request.counted(fleet, warm=hot)
            _spend(
                replay.budget,
                s,
                request.family,
                counted,
                replay.chains.rate[replay.chains.head[index]],
            )
    curve.append((fleet.end, world.key_usd))
    return Achievable(world.key_usd, tuple(curve), time.perf_counter() - began, tuple(schedule))


def _admits(world: World, trace: Trace, request: FlatRequest, s: int) -> bool:
    """Whether plan ``s`` may serve ``request`` now: usable, and the simulator admits."""
    if not usable(trace.fleet.subscriptions[s], request.at):
        return False
    credential = world.subscriptions[s + 1].credential
    return world.sim.check_quota(credential, request.model).allowed


def _left(budget: Budget, s: int, family: str | None, rate: int) -> float:
    """What plan ``s`` has left for ``family`` in classes up to ``rate``: a chain may
    take the budget planned for cheaper ones, being worth more."""
    return sum(max(0.0, v) for c, v in budget.get((s, family), {}).items() if c <= rate)


def _choose(
    world: World, trace: Trace, request: FlatRequest, budget: Budget, rate: int
) -> int | None:
    """The plan (fleet index) for a chain that starts (or moves) at ``request``, one
    the simulator admits now with the most budget for its family in classes up to
    its ``rate``. None: the key."""
    best: tuple[float, int] | None = None
    for s in range(len(trace.fleet.subscriptions)):
        left = _left(budget, s, request.family, rate)
        if left <= 0 or not _admits(world, trace, request, s):
            continue
        if best is None or (left, -s) > best:
            best = (left, -s)
    return None if best is None else -best[1]


def _spend(budget: Budget, s: int, family: str | None, tokens: float, rate: int) -> None:
    """Take ``tokens`` off plan ``s``'s budget for ``family``: the cheapest classes up
    to ``rate`` first; what they lack comes off ``rate``'s own (below zero)."""
    classes = budget.setdefault((s, family), {})
    for c in sorted(c for c in classes if c <= rate):
        if tokens <= 0:
            break
        take = min(tokens, max(0.0, classes[c]))
        classes[c] -= take
        tokens -= take
    if tokens > 0:
        classes[rate] = classes.get(rate, 0.0) - tokens
