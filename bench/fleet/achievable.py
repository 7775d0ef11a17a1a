"""A clairvoyant schedule replayed through ``World``: an upper bound on the optimum.

Every request of the trace, in time order, goes to a plan that serves it now (asked
of the simulator first, so none is refused) or to the key. The plan is chosen
knowing the future (``bench.fleet.foresight``): a window that the request would take
to or over its capacity takes it only if no dearer request (what the key bills for
it warm) that could count against it arrives before the window resets, or, for a
weekly window, fewer dearer ones than there are plans' windows of its kind that
wait for one (the last request a window serves is served whole, so it should be the
dearest on offer, and each waiting window gets one);
among the plans left, one the request takes over a window comes first (that
overdraw is free), then the plan whose weekly room is most urgent (room over what
its 5h window can still pass before the room is lost at its reset or the trace's
end), then the plan whose 7d window is fullest. Failing all, the key.

Following the MILP's allocations instead (``bench.fleet.milp``) did worse on the kept
traces ($18.4 against $8.0 on ``steady``): its fractional service and free choice of
the crossing request are what real requests cannot follow.

Each request is sent with its cached prefix and session (its agent), so the world
decides whether the prefix is read or written again and the key bills accordingly;
requests are compared by what they count warm and what the key bills for them warm.
The world's own accounting decides what was served, so the schedule's key $ is what
one real policy would pay: the optimum costs at most this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from bench.fleet.cells import FlatRequest, requests_of, usable
from bench.fleet.foresight import Foresight
from bench.fleet.trace import Trace
from bench.fleet.world import World, to_unix
from simulator.state import WINDOW_DURATIONS

MTOK = 1e6


@dataclass(frozen=True)
class Achievable:
    """The schedule's key $, its cumulative key spend [(instant, $)], time taken, and
    where each request went (``requests_of`` order; a fleet index, None: the key)."""

    usd: float
    curve: tuple[tuple[datetime, float], ...]
    seconds: float
    schedule: tuple[int | None, ...]


def _serving(world: World, trace: Trace, request: FlatRequest) -> list[int]:
    """The plans (fleet index) that would serve ``request`` now (the simulator says so)."""
    return [
        s
        for s, spec in enumerate(trace.fleet.subscriptions)
        if usable(spec, request.at)
        and world.sim.check_quota(world.subscriptions[s + 1].credential, request.model).allowed
    ]


def _waiting(world: World, trace: Trace, request: FlatRequest) -> dict[str, int]:
    """Per weekly window name, how many usable plans have no more room left in it
    than ``request``: windows that each want one request at least this dear to go
    over, so the dearest to come cannot serve them all."""
    counts: dict[str, int] = {}
    counted = request.counted(trace.fleet)
    for s, spec in enumerate(trace.fleet.subscriptions):
        if not usable(spec, request.at):
            continue
        credential = world.subscriptions[s + 1].credential
        credential.roll(to_unix(request.at))
        for window in credential.applicable_windows(request.model):
            if window.name != "five_hour" and window.capacity - window.used <= counted:
                counts[window.name] = counts.get(window.name, 0) + 1
    return counts


def _fit(
    world: World,
    trace: Trace,
    foresight: Foresight,
    request: FlatRequest,
    s: int,
    waiting: dict[str, int],
    calm: float,
) -> tuple[bool, float, float] | None:
    """How plan ``s`` would take ``request``: None if it should not (it would take a
    window over while as many dearer requests are still to come as there are windows
    waiting for one), else whether it takes a window over, how urgent the plan's
    weekly room is (0 below ``calm``), and how full its 7d window is."""
    credential = world.subscriptions[s + 1].credential
    at, end = to_unix(request.at), max(to_unix(trace.fleet.end), foresight.last)
    rate = credential.windows["five_hour"].capacity / WINDOW_DURATIONS["five_hour"]
    crosses, urgency = False, 0.0
    for window in credential.applicable_windows(request.model):
        room = window.capacity - window.used
        lost_at = min(window.resets_at() or end, end)
        if request.counted(trace.fleet) >= room:
            value = request.key_usd(trace.fleet) * MTOK
            enough = waiting.get(window.name, 1)
            if foresight.dearer(window.name, at, lost_at, value, enough) >= enough:
                return None
            crosses = True
        if window.name != "five_hour":
            urgency = max(urgency, room / (rate * max(lost_at - at, 1.0)))
    week = credential.windows["seven_day"]
    return crosses, urgency if urgency >= calm else 0.0, week.used / week.capacity


def _choose(
    world: World, trace: Trace, foresight: Foresight, request: FlatRequest, calm: float
) -> int | None:
    """The plan (fleet index) for ``request``, one that serves it now; None: the key."""
    waiting = _waiting(world, trace, request)
    fits = [
        (fit, s)
        for s in _serving(world, trace, request)
        if (fit := _fit(world, trace, foresight, request, s, waiting, calm)) is not None
    ]
    return max(fits)[1] if fits else None


def schedule_send(world: World, request: FlatRequest, s: int | None) -> None:
    """Send ``request`` through ``world`` on plan index ``s`` (None: the key), as a
    clairvoyant schedule does: it asked first, so a refusal is a bug and raises."""
    rung = world.key_rung if s is None else world.subscriptions[s + 1].rung
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


def achievable_replay(trace: Trace, *, calm: float = 0.0) -> Achievable:
    """Replay the schedule through a fresh ``World``; raises RuntimeError on a refusal
    (which asking the simulator first rules out).

    ``calm``: weekly room less urgent than this does not rank plans; the fullest 7d
    window goes first instead, so windows fill one after another and each waits for
    its big crossing request at a different time (0: urgency always ranks).
    """
    began = time.perf_counter()
    world = World(trace.fleet)
    requests = requests_of(trace)
    keep = max(1, len(trace.fleet.subscriptions))
    foresight = Foresight(requests, lambda r: r.key_usd(trace.fleet) * MTOK, keep)
    curve = [(trace.fleet.start, 0.0)]
    schedule: list[int | None] = []
    for request in requests:
        world.now(request.at)
        s = _choose(world, trace, foresight, request, calm)
        schedule.append(s)
        schedule_send(world, request, s)
        if s is None:
            curve.append((request.at, world.key_usd))
    curve.append((trace.fleet.end, world.key_usd))
    return Achievable(world.key_usd, tuple(curve), time.perf_counter() - began, tuple(schedule))
