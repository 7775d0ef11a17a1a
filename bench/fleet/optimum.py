"""The hindsight optimum: a lower bound on key spend, from an LP solved with HiGHS.

The LP relaxation of "assign each turn's tokens to a subscription window or to the
key": variables ``x[t, s]`` (tokens of turn t served by subscription s, fractional)
and ``y[t]`` (tokens of turn t on the key), in millions of tokens.

    minimise   price · Σ_t y[t]
    subject to Σ_s x[t, s] + y[t] = n[t]                 for every turn t
               Σ_{t ∈ W} x[t, s] ≤ cap(W)               for every window W of s
               x[t, s] = 0 where s is revoked at t's instant
               0 ≤ x[t, s], y[t] ≤ n[t]

``W`` ranges over every period of every window of s (5h, 7d, and the weekly window
of the turn's model family) that a turn falls in; a turn belongs to the windows its
request counts against (``Credential.applicable_windows``' rule). The provider
serves a request while a window has used less than its capacity and then counts
all of it, so a window can end up to one request over: ``cap(W)`` is what was left
of it at the start (its capacity for later periods), less one token, plus the
largest turn that falls in it. Every policy's run is a feasible point of this LP,
so none can spend less on the key; a test asserts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_array

from bench.fleet.trace import Trace
from bench.fleet.world import to_unix
from simulator.state import FAMILY_WINDOW, WINDOW_DURATIONS, model_family

MTOK = 1e6


@dataclass(frozen=True)
class Optimum:
    key_usd: float
    key_tokens: float
    status: str
    # Tokens each turn put on the key in the optimal solution (trace order).
    key_by_turn: tuple[float, ...]
    variables: int
    constraints: int

    def key_spend_curve(self, trace: Trace) -> list[tuple[datetime, float]]:
        price = trace.fleet.key_usd_per_mtok / MTOK
        total, points = 0.0, [(trace.fleet.start, 0.0)]
        for turn, tokens in zip(trace.turns, self.key_by_turn, strict=True):
            if tokens > 0:
                total += tokens * price
                points.append((turn.at, total))
        points.append((trace.fleet.end, total))
        return points


def _windows_of(model: str) -> tuple[str, ...]:
    family = model_family(model)
    extra = (FAMILY_WINDOW[family],) if family in FAMILY_WINDOW else ()
    return ("five_hour", "seven_day", *extra)


def optimum_solve(trace: Trace, *, overdraw: bool = True) -> Optimum:
    """Solve the LP for ``trace``; raises RuntimeError if HiGHS finds no optimum.

    ``overdraw=False`` drops the allowance for the request that crosses a window's
    capacity (each window holds exactly what it had left): the capacity LP. It is
    no bound on the simulated provider, which serves that request whole, but it is
    the yardstick a policy that cannot pick which request crosses can approach.
    """
    fleet = trace.fleet
    turns = trace.turns
    subs = fleet.subscriptions
    count, plans = len(turns), len(subs)
    y0 = count * plans  # index of y[0]
    tokens = np.array([t.tokens for t in turns], dtype=float) / MTOK

    # Which turns fall in which window period of which subscription.
    groups: dict[tuple[int, str, int], list[int]] = {}
    upper = np.zeros(y0 + count)
    for t, turn in enumerate(turns):
        at = to_unix(turn.at)
        windows = _windows_of(trace.model_of(turn))
        upper[y0 + t] = tokens[t]
        for s, spec in enumerate(subs):
            if spec.revoked_at is not None and turn.at >= spec.revoked_at:
                continue  # a revoked plan serves nothing from then on
            upper[t * plans + s] = tokens[t]
            for name in windows:
                window = spec.windows.get(name)
                if window is None:
                    continue
                duration = WINDOW_DURATIONS[name]
                first_start = to_unix(window.first_reset) - duration
                period = int((at - first_start) // duration)
                groups.setdefault((s, name, period), []).append(t)

    rows: list[int] = []
    cols: list[int] = []
    caps: list[float] = []
    for (s, name, period), members in sorted(groups.items()):
        window = subs[s].windows[name]
        left = window.capacity - window.used if period == 0 else window.capacity
        xs = [t * plans + s for t in members]
        if left <= 0:
            upper[xs] = 0.0  # exhausted at the start: it refuses until it resets
            continue
        # The request that crosses the capacity is served whole: the window can end
        # up to its largest request over (less the one token it had to have left).
        allowance = max(turns[t].tokens for t in members) - 1 if overdraw else 0
        row = len(caps)
        caps.append((left + allowance) / MTOK)
        rows.extend([row] * len(xs))
        cols.extend(xs)
    total = y0 + count
    a_ub = coo_array(
        (np.ones(len(rows)), (np.array(rows, dtype=int), np.array(cols, dtype=int))),
        shape=(len(caps), total),
    ).tocsr()
    eq_rows = np.repeat(np.arange(count), plans + 1)
    eq_cols = np.concatenate(
        [np.append(np.arange(t * plans, (t + 1) * plans), y0 + t) for t in range(count)]
    ).astype(int)
    a_eq = coo_array((np.ones(len(eq_rows)), (eq_rows, eq_cols)), shape=(count, total)).tocsr()
    cost = np.zeros(total)
    cost[y0 : y0 + count] = fleet.key_usd_per_mtok  # $ per Mtok on the key; plans cost nothing more
    result = linprog(
        cost,
        A_ub=a_ub if caps else None,
        b_ub=np.array(caps) if caps else None,
        A_eq=a_eq,
        b_eq=tokens,
        bounds=np.column_stack([np.zeros(total), upper]),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"the optimum LP did not solve: {result.message}")
    key = np.clip(result.x[y0 : y0 + count], 0.0, None) * MTOK
    return Optimum(
        key_usd=float(result.fun),
        key_tokens=float(key.sum()),
        status=str(result.message),
        key_by_turn=tuple(float(v) for v in key),
        variables=total,
        constraints=len(caps) + count,
    )
