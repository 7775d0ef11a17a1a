"""A trace as the bounds see it: its requests in time order, and the week cut into cells.

Both bounds (``bench.fleet.milp``, ``bench.fleet.achievable``) work on the unit of
service, the request. A cell is a stretch of time inside which nothing the quota
model cares about changes: no window period starts or ends, no bucket of one starts,
no plan is added, removed or revoked. So within one cell a plan is either usable or
not, and every request of a model family counts against the same window periods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from bench.fleet.trace import Fleet, Request, SubscriptionSpec, Trace
from bench.fleet.world import to_unix
from simulator.state import FAMILY_WINDOW, WINDOW_DURATIONS, model_family

# The crossing request of a window is placed to within one bucket. Finer buckets give a
# tighter bound and a larger MILP; these keep a week of 7 plans well under a minute.
BUCKET_SECONDS: dict[str, int] = {"five_hour": 30 * 60}
WEEKLY_BUCKET_SECONDS = 2 * 60 * 60


@dataclass(frozen=True)
class FlatRequest:
    """One request of one turn: its instant, model, family (None: no weekly family
    window), fresh tokens, cached prefix, session (the agent: whose prompt cache it
    reads) and turn (index in the trace; -1: none)."""

    at: datetime
    model: str
    family: str | None
    tokens: int
    cached: int = 0
    session: str | None = None
    turn: int = -1

    @property
    def request(self) -> Request:
        return Request(0.0, self.tokens, self.cached)

    def counted(self, fleet: Fleet, *, warm: bool = True) -> int:
        """What it counts in a plan's windows (``Fleet.counted``)."""
        return fleet.counted(self.request, warm=warm)

    def key_usd(self, fleet: Fleet, *, warm: bool = True) -> float:
        """What the key bills for it (``Fleet.key_usd``)."""
        return fleet.key_usd(self.model, self.request, warm=warm)


def requests_of(trace: Trace) -> list[FlatRequest]:
    """Every request of every turn, in time order (ties: trace order, then offset)."""
    flat = [
        FlatRequest(
            turn.at + timedelta(seconds=part.offset),
            trace.model_of(turn),
            model_family(trace.model_of(turn)),
            part.tokens,
            part.cached,
            turn.agent,
            index,
        )
        for index, turn in enumerate(trace.turns)
        for part in turn.parts
    ]
    flat.sort(key=lambda r: r.at)  # stable
    return flat


def windows_for(family: str | None) -> tuple[str, ...]:
    """The windows a request of ``family`` counts against
    (``Credential.applicable_windows``' rule)."""
    extra = (FAMILY_WINDOW[family],) if family in FAMILY_WINDOW else ()
    return ("five_hour", "seven_day", *extra)


def bucket_seconds(window: str) -> int:
    return BUCKET_SECONDS.get(window, WEEKLY_BUCKET_SECONDS)


def period_of(spec: SubscriptionSpec, window: str, at: float) -> int:
    """The index of ``window``'s period of ``spec`` in force at ``at`` (0: the one in
    force when the plan's trace starts; period k starts k durations after it)."""
    duration = WINDOW_DURATIONS[window]
    return math.floor((at - period_start(spec, window, 0)) / duration)


def period_start(spec: SubscriptionSpec, window: str, period: int) -> float:
    duration = WINDOW_DURATIONS[window]
    return to_unix(spec.windows[window].first_reset) - duration + period * duration


def usable(spec: SubscriptionSpec, at: datetime) -> bool:
    """Whether ``spec`` can serve at ``at``: registered, not revoked, not paused."""
    return (
        spec.present(at)
        and (spec.revoked_at is None or at < spec.revoked_at)
        and not spec.paused_at(at)
    )


def _boundaries(trace: Trace) -> np.ndarray:
    """Every instant in [start, end] where a cell starts, ascending, end last; end is
    the trace's, or just after its last request if a turn runs past it."""
    fleet = trace.fleet
    last = max((to_unix(t.ends_at) for t in trace.turns), default=0.0)
    start, end = to_unix(fleet.start), max(to_unix(fleet.end), last + 1.0)
    found = [start, end]
    for spec in fleet.subscriptions:
        paused = [edge for span in spec.paused for edge in span]
        for instant in (spec.added_at, spec.removed_at, spec.revoked_at, *paused):
            if instant is not None:
                found.append(to_unix(instant))
        for window in spec.windows:
            step = bucket_seconds(window)
            first = period_start(spec, window, period_of(spec, window, start))
            found.extend(np.arange(first, end, step).tolist())
            # A period need not be a whole number of buckets: each starts one afresh.
            duration = WINDOW_DURATIONS[window]
            found.extend(np.arange(first, end, duration).tolist())
    edges = np.unique(np.array(found, dtype=float))
    return edges[(edges >= start) & (edges <= end)]


@dataclass(frozen=True)
class Cells:
    """The partition: cell i is [starts[i], starts[i+1])."""

    starts: np.ndarray

    def of(self, at: datetime) -> int:
        return int(np.searchsorted(self.starts, to_unix(at), side="right")) - 1

    def middle(self, cell: int) -> float:
        """An instant inside ``cell`` away from its edges, to classify it by: at an
        edge, float rounding could put it in the period or bucket before."""
        return float(self.starts[cell] + self.starts[cell + 1]) / 2


def cells_of(trace: Trace) -> Cells:
    return Cells(_boundaries(trace))
