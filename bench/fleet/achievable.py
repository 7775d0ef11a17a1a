"""A clairvoyant schedule replayed through ``World``: an upper bound on the optimum.

Every request of the trace, in time order, goes to a plan that serves it now (asked
of the simulator first, so none is refused) or to the key. Which plan is chosen
knowing the future, from the MILP's best point (``bench.fleet.milp.LowerBound
.targets``): a request goes where its (cell, family) still has tokens allotted; one
with nothing allotted goes to a plan only where that leaves room for everything
still allotted to the windows it counts against, preferring the plan whose windows
reset soonest (what it spends there comes back first), else to the key. The world's
own accounting decides what was served, so the key $ of the schedule is what one
real policy would pay: the optimum costs at most this.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from bench.fleet.cells import Cells, FlatRequest, period_of, requests_of, usable, windows_for
from bench.fleet.foresight import Foresight
from bench.fleet.trace import Trace
from bench.fleet.world import World, to_unix
from simulator.state import WINDOW_DURATIONS

MTOK = 1e6
Target = tuple[int, str | None, int]  # (cell, family, plan index)
WindowKey = tuple[int, str, int]  # (plan index, window name, period)


@dataclass(frozen=True)
class Achievable:
    """The schedule's key $, its cumulative key spend [(instant, $)], and time taken."""

    usd: float
    curve: tuple[tuple[datetime, float], ...]
    seconds: float


class _Allotment:
    """What is still allotted per (cell, family, plan), and per window period the sum
    of what is allotted from now on (so an unallotted request can leave room for it)."""

    def __init__(self, trace: Trace, cells: Cells, targets: Mapping[Target, float]) -> None:
        self.trace, self.cells = trace, cells
        self.left: dict[Target, float] = {k: v for k, v in targets.items() if v > 0}
        self.by_cell: dict[int, list[Target]] = defaultdict(list)
        self.reserved: dict[WindowKey, float] = defaultdict(float)
        for target, tokens in self.left.items():
            self.by_cell[target[0]].append(target)
            for window in self._windows(target):
                self.reserved[window] += tokens
        self.past = sorted(self.by_cell)
        self.cursor = 0

    def _windows(self, target: Target) -> list[WindowKey]:
        cell, family, s = target
        spec = self.trace.fleet.subscriptions[s]
        at = float(self.cells.starts[cell])
        return [(s, w, period_of(spec, w, at)) for w in windows_for(family)]

    def advance(self, cell: int) -> None:
        """Forget what was allotted to cells before ``cell`` and never used."""
        while self.cursor < len(self.past) and self.past[self.cursor] < cell:
            for target in self.by_cell[self.past[self.cursor]]:
                self.take(target, self.left.get(target, 0.0))
            self.cursor += 1

    def take(self, target: Target, tokens: float) -> None:
        used = min(tokens, self.left.get(target, 0.0))
        if used <= 0:
            return
        self.left[target] -= used
        for window in self._windows(target):
            self.reserved[window] -= used


# A window about to go over takes a request only if it is at least this share of the
# largest one still to come before it resets: the last request a window serves is
# served whole, so it should be a big one.
CROSSING_SHARE = 1.0


def _serving(world: World, trace: Trace, request: FlatRequest) -> list[int]:
    """The plans that would serve ``request`` now (the simulator says so)."""
    return [
        s
        for s, spec in enumerate(trace.fleet.subscriptions)
        if usable(spec, request.at)
        and world.sim.check_quota(world.subscriptions[s + 1].credential, request.model).allowed
    ]


def _fit(world: World, allot: _Allotment, foresight: Foresight, request: FlatRequest, s: int):
    """How plan ``s`` would take ``request``: None (not without harm), else (whether
    it takes a window over, how urgent its weekly room is: room / what its 5h window
    could still pass before that room is lost)."""
    spec, credential = allot.trace.fleet.subscriptions[s], world.subscriptions[s + 1].credential
    at, end = to_unix(request.at), to_unix(allot.trace.fleet.end)
    rate = credential.windows["five_hour"].capacity / WINDOW_DURATIONS["five_hour"]
    crosses, urgency = False, 0.0
    for w in credential.applicable_windows(request.model):
        reserved = allot.reserved[(s, w.name, period_of(spec, w.name, at))]
        room = w.capacity - w.used - reserved
        lost_at = min(w.resets_at() or end, end)
        if request.tokens >= room:
            later = foresight.largest(w.name, at, lost_at)
            if reserved > 0 or request.tokens < CROSSING_SHARE * later:
                return None
            crosses = True
        if w.name != "five_hour":
            urgency = max(urgency, room / (rate * max(lost_at - at, 1.0)))
    return crosses, urgency


def _choose(
    world: World, allot: _Allotment, foresight: Foresight, request: FlatRequest, cell: int
) -> int | None:
    """The plan index for ``request`` (one that serves it now), or None for the key."""
    serving = _serving(world, allot.trace, request)
    allotted = [s for s in serving if allot.left.get((cell, request.family, s), 0.0) > 0]
    if allotted:
        return max(allotted, key=lambda s: allot.left[(cell, request.family, s)])
    fits = [(fit, s) for s in serving if (fit := _fit(world, allot, foresight, request, s))]
    return max(fits)[1] if fits else None


def achievable_replay(
    trace: Trace, cells: Cells, targets: Mapping[Target, float]
) -> Achievable:
    """Replay the schedule that follows ``targets``; raises RuntimeError on a refusal
    (which the choice rules out)."""
    began = time.perf_counter()
    world = World(trace.fleet)
    allot = _Allotment(trace, cells, targets)
    requests = requests_of(trace)
    foresight = Foresight(requests)
    total, curve = 0.0, [(trace.fleet.start, 0.0)]
    for request in requests:
        cell = cells.of(request.at)
        allot.advance(cell)
        world.now(request.at)
        s = _choose(world, allot, foresight, request, cell)
        rung = world.key_rung if s is None else world.subscriptions[s + 1].rung
        outcome = world.attempt(rung, model=request.model, tokens=request.tokens, at=request.at)
        if not outcome.ok:
            raise RuntimeError(f"the schedule was refused at {request.at}: {outcome.detail}")
        if s is None:
            total += request.tokens * trace.fleet.key_price(request.model) / MTOK
            curve.append((request.at, total))
        else:
            allot.take((cell, request.family, s), request.tokens)
    curve.append((trace.fleet.end, total))
    return Achievable(total, tuple(curve), time.perf_counter() - began)
