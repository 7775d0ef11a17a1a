"""A lower bound on key spend that no policy can beat: a MILP solved with HiGHS.

The exact problem: each request (``bench.fleet.cells.requests_of``) goes to a plan or
to the key; plan s serves a request while every window period it counts against has
used strictly less than what it had (``left(W)``: capacity less what was used at the
start for the period in force then, the capacity for later ones), and then counts all
of it, so a window ends at most one request over. Minimise the key's $.

The relaxation. Requests are pooled per (cell, model family, rate class) (``bench.fleet.cells``,
the class below):
demand ``D[g]`` (tokens), its largest request ``m[g]`` and the key's price ``p[g]``.
Variables, in Mtok: ``X[g, s]`` in [0, D[g]], tokens of group g served by plan s,
present only where s is registered, not revoked, and no window it counts against was
exhausted at the start; the key takes ``D[g] - Σ_s X[g, s] ≥ 0``. Each window period
W of s is cut into buckets (``cells.bucket_seconds``); ``a[W, j]`` is binary, "the
request that took W over ``left(W)`` fell in bucket j or earlier", non-decreasing in j,
so ``z[W, j] = a[W, j] - a[W, j-1]`` marks the crossing bucket (at most one). With
``M[W, j]`` the largest request in bucket j that could count against W:

    minimise   Σ_g p[g] (D[g] - Σ_s X[g, s])
    subject to Σ_{g ∈ W} X[g, s] ≤ left(W) + Σ_j z[W, j] (M[W, j] - 1)    every W
               Σ_{g ∈ bucket j of W} X[g, s] ≤ D_j(W) (1 - a[W, j-1])     every W, j ≥ 1

Validity: take any run of any policy and set X to what each plan served per group,
and for each W whose usage went past ``left(W)``, z = 1 at the bucket of the request
that took it past. Before that request W had used at most ``left(W) - 1`` (whole
tokens, strictly below), so W served at most ``left(W) - 1 + M`` in all; after it W
refuses every request until it resets, so later buckets serve nothing on s; a W that
never went past served at most ``left(W)`` with every a = 0. Requests the run failed
count as key tokens. That point is feasible and costs the run's key spend, so the
MILP's optimum, and HiGHS' dual bound on it (what is reported, so a solve cut short
by the time limit still bounds), is at most any run's spend.

The prompt cache. A request counts ``Fleet.counted`` in a window and the key bills
``Fleet.key_usd`` for it, both least when its prefix is warm (a read) and most when
it is written. Which one it is, the world decides (``cache.PromptCache``): warm only
where the session's last served request went, at most ``TTL_SECONDS`` before. A
run sends every request at its trace instant or never: ``Policy._try`` sends each at
``max(turn start + offset, the turn's clock)``, the turn's clock starts at the turn's
instant and only takes the instants of its requests sent before, whose offsets are
no later, so the max is always the trace instant; no policy delays a turn (a
``Park`` ends it unserved). So a request none of whose session's requests comes
within the TTL before it (``cells.may_be_warm``) is a write in every run: the bound
counts it written, and every other request read, its cheapest case. Both are then
what the request counts and costs at least in any run.

Rates differ from request to request (a read prefix costs the key 0.1× its input
price and counts 0.029× in a window on the kept traces; a written one 1.25× and
1.077×), so a group holds requests of one rate class: key $ per counted token
within ``cells.RATE_STEP`` of each other (``cells.rate_class``). Its key $ is priced
at ``p[g]``, the largest rate of its requests, over at most ``K[g] / p[g]`` tokens
(``K[g]``: its key $ so counted; equal to ``D[g]`` when every request has the same
rate, as without a cache). A run's point sets X to the key $ (so counted) it kept
off the key over ``p[g]``: no more than the tokens it counted (so every window row
holds, a crossing request's share no more than its count), and the objective ``K[g]
- p[g] Σ_s X`` is the key $ of what the run sent to the key, at most what the key
billed it. One class for every rate would price a group's every token at its
dearest request's rate: on ``steady`` that bound was $106, against $243 with classes.

Runs compared with the bound serve every request. A run that fails some is
compared with the bound with each failed request priced warm on the key
(``Metrics.failed_usd``): its point takes a failed request onto the key at the
bound's price, written where ``may_be_warm`` says so, which the floor does not
charge, so for such a run the check is short of a proof by that difference.

Pooling loses nothing else: the requests of a group meet the same rows with the
same coefficients, so any pooled X ≤ D splits back into per-request amounts in [0, n].
With cells finer than every constraint's granularity (each boundary of a window
period, a bucket, a plan's arrival, removal or revocation is a cell edge) this is
exactly the request-level relaxation: fractional service, the crossing placed to
within a bucket, and the crossing bucket itself left open (valid, if looser than the
truth, which closes the window right after the crossing request).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds as VariableBounds
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_array

from bench.fleet.cells import (
    RATE_STEP,
    Cells,
    bucket_seconds,
    cells_of,
    may_be_warm,
    period_of,
    period_start,
    rate_class,
    requests_of,
    usable,
    windows_for,
)
from bench.fleet.trace import Trace
from bench.fleet.world import from_unix

MTOK = 1e6
TIME_LIMIT_SECONDS = 50.0

Group = tuple[int, str | None, int]  # (cell, model family, rate class)
WindowKey = tuple[int, str, int]  # (plan index, window name, period)


@dataclass(frozen=True)
class LowerBound:
    """The bound in $, how HiGHS ended (status, relative gap), time and sizes."""

    usd: float
    status: str
    gap: float | None
    seconds: float
    variables: int
    binaries: int
    constraints: int


@dataclass
class _Model:
    """The MILP under construction: columns, rows (coordinate form) and their bounds."""

    cost: list[float]
    upper: list[float]
    integral: list[int]
    rows: list[int]
    cols: list[int]
    values: list[float]
    rhs: list[float]

    def column(self, cost: float, upper: float, *, integral: bool = False) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        self.integral.append(int(integral))
        return len(self.cost) - 1

    def row(self, terms: list[tuple[int, float]], rhs: float) -> None:
        index = len(self.rhs)
        for col, value in terms:
            self.rows.append(index)
            self.cols.append(col)
            self.values.append(value)
        self.rhs.append(rhs)


@dataclass(frozen=True)
class _Demand:
    """Per group: ``tokens``, what its requests count in a window warm (the least
    they can count); ``micro_usd``, what the key bills for them warm (the least it
    can bill), in millionths of a dollar; ``rate``, the largest of its requests'
    $ per Mtok counted; ``largest``, the most one of them counts."""

    tokens: dict[Group, int]
    micro_usd: dict[Group, float]
    rate: dict[Group, float]
    largest: dict[Group, int]

    def served(self, group: Group) -> float:
        """The most X of ``group`` can be: the key $ it holds, in tokens at its rate
        (its warm tokens when every request has the same rate)."""
        rate = self.rate[group]
        return min(float(self.tokens[group]), self.micro_usd[group] / rate) if rate > 0 else 0.0


def _groups(trace: Trace, cells: Cells, step: float) -> _Demand:
    tokens: dict[Group, int] = defaultdict(int)
    micro_usd: dict[Group, float] = defaultdict(float)
    rate: dict[Group, float] = defaultdict(float)
    largest: dict[Group, int] = defaultdict(int)
    requests = requests_of(trace)
    for request, warm in zip(requests, may_be_warm(requests), strict=True):
        counted = request.counted(trace.fleet, warm=warm)
        billed = request.key_usd(trace.fleet, warm=warm) * MTOK
        group = (cells.of(request.at), request.family, rate_class(billed, counted, step))
        tokens[group] += counted
        micro_usd[group] += billed
        largest[group] = max(largest[group], counted)
        if counted > 0:
            rate[group] = max(rate[group], billed / counted)
    return _Demand(dict(tokens), dict(micro_usd), dict(rate), dict(largest))


def _left(trace: Trace, key: WindowKey) -> int:
    s, window, period = key
    spec = trace.fleet.subscriptions[s].windows[window]
    return spec.capacity - spec.used if period == 0 else spec.capacity


def _service_columns(
    trace: Trace, cells: Cells, demand: _Demand, model: _Model
) -> tuple[dict[tuple[Group, int], int], dict[WindowKey, list[tuple[int, Group]]]]:
    """One X column per (group, plan) that could serve; each window period's members."""
    columns: dict[tuple[Group, int], int] = {}
    members: dict[WindowKey, list[tuple[int, Group]]] = defaultdict(list)
    for group in sorted(demand.tokens, key=lambda g: (g[0], str(g[1]), g[2])):
        cell, family, _ = group
        at = cells.middle(cell)
        price, tokens = demand.rate[group], demand.served(group)
        if tokens <= 0:
            continue
        for s, spec in enumerate(trace.fleet.subscriptions):
            if not usable(spec, from_unix(at)):
                continue
            keys = [
                (s, w, period_of(spec, w, at)) for w in windows_for(family) if w in spec.windows
            ]
            if any(k[2] < 0 or _left(trace, k) <= 0 for k in keys):
                continue  # not begun, or exhausted at the start: it refuses until a reset
            col = model.column(-price, tokens / MTOK)
            columns[(group, s)] = col
            for key in keys:
                members[key].append((col, group))
    return columns, members


def _window_rows(
    trace: Trace,
    cells: Cells,
    key: WindowKey,
    members: list[tuple[int, Group]],
    demand: _Demand,
    model: _Model,
) -> None:
    """W's capacity row with its crossing binaries, and its closed-after-crossing rows."""
    left = _left(trace, key)
    if sum(demand.served(g) for _, g in members) <= left:
        return  # W cannot bind
    s, window, period = key
    spec = trace.fleet.subscriptions[s]
    begin, step = period_start(spec, window, period), bucket_seconds(window)
    buckets: dict[int, list[tuple[int, Group]]] = defaultdict(list)
    for col, group in members:
        buckets[int((cells.middle(group[0]) - begin) // step)].append((col, group))
    ordered = [buckets[b] for b in sorted(buckets)]
    crossing = [model.column(0.0, 1.0, integral=True) for _ in ordered]
    overdraw = [(max(demand.largest[g] for _, g in bucket) - 1) / MTOK for bucket in ordered]
    # Σ_j (a_j - a_{j-1}) (M_j - 1), regrouped by a_j.
    allowance = [
        (crossing[j], -overdraw[j] + (overdraw[j + 1] if j + 1 < len(ordered) else 0.0))
        for j in range(len(ordered))
    ]
    model.row([(col, 1.0) for col, _ in members] + allowance, left / MTOK)
    for j in range(1, len(ordered)):
        tokens = sum(demand.served(g) for _, g in ordered[j]) / MTOK
        model.row([(col, 1.0) for col, _ in ordered[j]] + [(crossing[j - 1], tokens)], tokens)
        model.row([(crossing[j - 1], 1.0), (crossing[j], -1.0)], 0.0)


def _demand_rows(columns: dict[tuple[Group, int], int], model: _Model) -> None:
    """Σ_s X[g, s] ≤ D[g] where more than one plan could serve g (else X's bound)."""
    by_group: dict[Group, list[int]] = defaultdict(list)
    for (group, _), col in columns.items():
        by_group[group].append(col)
    for cols in by_group.values():
        if len(cols) > 1:
            model.row([(col, 1.0) for col in cols], model.upper[cols[0]])


def _solve(model: _Model, time_limit: float) -> tuple[float, str, float | None]:
    """HiGHS' dual bound on the minimum (valid when time runs out), status and gap."""
    count = len(model.cost)
    if not model.rhs:
        return float(np.dot(model.cost, model.upper)), "no binding window", 0.0
    matrix = coo_array(
        (model.values, (model.rows, model.cols)), shape=(len(model.rhs), count)
    ).tocsr()
    result = milp(
        np.array(model.cost),
        constraints=LinearConstraint(matrix, -np.inf, np.array(model.rhs)),
        integrality=np.array(model.integral),
        bounds=VariableBounds(np.zeros(count), np.array(model.upper)),
        options={"time_limit": time_limit, "disp": False},
    )
    dual = getattr(result, "mip_dual_bound", None)
    if result.status == 0 and dual is None:
        dual = result.fun
    if dual is None or not np.isfinite(dual):
        raise RuntimeError(f"the bound MILP gave no dual bound: {result.message}")
    gap = getattr(result, "mip_gap", None)
    return float(dual), str(result.message), None if gap is None else float(gap)


def lower_solve(
    trace: Trace, *, time_limit: float = TIME_LIMIT_SECONDS, rate_step: float = RATE_STEP
) -> LowerBound:
    """The MILP's bound on ``trace``'s key spend ($), its groups ``rate_step`` apart
    in rate (coarser: a smaller model, a looser bound); raises RuntimeError if HiGHS
    ends with no dual bound at all."""
    began = time.perf_counter()
    cells = cells_of(trace)
    demand = _groups(trace, cells, rate_step)
    model = _Model([], [], [], [], [], [], [])
    columns, members = _service_columns(trace, cells, demand, model)
    for key in sorted(members):
        _window_rows(trace, cells, key, members[key], demand, model)
    _demand_rows(columns, model)
    dual, status, gap = _solve(model, time_limit)
    everything = sum(demand.micro_usd.values()) / MTOK
    return LowerBound(
        usd=max(0.0, everything + dual),
        status=status,
        gap=gap,
        seconds=time.perf_counter() - began,
        variables=len(model.cost),
        binaries=sum(model.integral),
        constraints=len(model.rhs),
    )
