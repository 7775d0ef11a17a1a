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

from bench.fleet.cache import TTL_SECONDS
from bench.fleet.trace import Fleet, Request, SubscriptionSpec, Trace
from bench.fleet.world import to_unix
from simulator.state import FAMILY_WINDOW, WINDOW_DURATIONS, model_family

# The width of a rate class (``rate_class``): classes 2 % apart.
RATE_STEP = 0.02
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


def may_be_warm(requests: list[FlatRequest]) -> list[bool]:
    """Per request (``requests_of`` order), whether its prefix can be warm in any
    schedule: another request of its session comes at most the cache's TTL before it
    (or at the same instant, which the engine may send first). Every request is sent
    at its trace instant or not at all, and the cache is warm only where the session's
    last served request went, within the TTL; so a request with none of its session's
    within the TTL before it is a cache write wherever it goes. A request without a
    session reads what it names as cached (``PromptCache.warm``)."""
    warm = [request.session is None for request in requests]
    last: dict[str, tuple[float, int]] = {}
    for index, request in enumerate(requests):
        if request.session is None:
            continue
        at = to_unix(request.at)
        before = last.get(request.session)
        if before is not None and at - before[0] <= TTL_SECONDS:
            warm[index] = True
            if before[0] == at:
                warm[before[1]] = True
        last[request.session] = (at, index)
    return warm


def chains_of(requests: list[FlatRequest], warm: list[bool]) -> list[int]:
    """Per request, the index of the first request of its chain: a session's run of
    requests each within the TTL of the one before (``may_be_warm``), which one rung
    serves warm after its first wrote the prefix. A request without a session is a
    chain of its own."""
    head: dict[str, int] = {}
    chains = []
    for index, (request, hot) in enumerate(zip(requests, warm, strict=True)):
        if request.session is None:
            chains.append(index)
            continue
        if not hot or request.session not in head:
            head[request.session] = index
        chains.append(head[request.session])
    return chains


def rate_class(micro_usd: float, counted: int, step: float = RATE_STEP) -> int:
    """The class of key $ per counted token: classes are ``step`` apart, so tokens
    priced at their class's dearest rate are overvalued by less than that (-1: what
    counts nothing or costs nothing)."""
    if counted <= 0 or micro_usd <= 0:
        return -1
    return math.floor(math.log(micro_usd / counted) / math.log1p(step))


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
