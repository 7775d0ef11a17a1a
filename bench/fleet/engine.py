"""The discrete-event loop and the metrics of one policy's run over one trace.

The loop is an event heap on the simulated clock. Events, in time order (ties: a
plan removed, a plan revoked, the sampler's beat, then turns by trace index): a
removal takes the plan away from every policy's candidates and its agents'
assignments; a revocation flips the simulator's credential; a beat every
``TRINITY_HEADROOM_SAMPLE_SECONDS`` lets the policy's sampler probe (a plan only
once it is present) and samples every window for the plots; a turn starts at its
instant as the policy's generator (``Policy.run_turn``), which yields the instant of
each request it is about to send and is resumed when the clock gets there, so turns
overlap and their requests interleave with each other and with every other event.
Nothing sleeps and nothing is random, so a run is a function of its trace.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import NamedTuple

from django.conf import settings

from bench.fleet.cache import TTL_SECONDS
from bench.fleet.policies import Policy, TurnResult, TurnRun
from bench.fleet.trace import Trace, Turn
from bench.fleet.world import ResetRecord, World, from_unix, to_unix
from routing.rung import Rung, RungKind

# A switch back to where the agent came from within this long is a ping-pong.
PING_PONG_WITHIN = timedelta(hours=2)
# Event kinds, in their order at one instant.
REMOVE, REVOKE, BEAT, TURN = range(4)


@dataclass(frozen=True)
class TurnRecord:
    index: int
    turn: Turn
    result: TurnResult


class RequestRecord(NamedTuple):
    """One served request, flattened out of its turn for the metrics (a tuple: a run
    makes one per request). ``tokens`` are its fresh tokens, ``cached`` its prompt
    prefix, read where ``warm`` and written again otherwise; ``usd`` is what the key
    billed for it (0 when a plan served it)."""

    at: datetime
    turn: int
    agent: str
    tokens: int
    usd_per_mtok: float  # the key's price for the turn's model
    rung: Rung
    plan_could_serve: bool
    cached: int = 0
    warm: bool = True
    usd: float = 0.0


@dataclass
class Metrics:
    completed: int = 0
    failed: int = 0
    failed_requests: int = 0
    parked: int = 0
    key_usd: float = 0.0
    key_tokens: int = 0
    unused_five_hour_pct: float = 0.0
    unused_seven_day_pct: float = 0.0
    unused_seven_day_tokens: int = 0
    switches: int = 0
    ping_pongs: int = 0
    notifications: int = 0
    key_minutes_after_reset: float = 0.0
    key_requests_while_plan_served: int = 0
    refusals: int = 0
    failed_while_servable: int = 0
    failed_tokens: int = 0
    # What the failed requests would have cost on the key (their prefixes read warm).
    failed_usd: float = 0.0
    # Cached prefix tokens written again because the agent's cache was warm on
    # another credential: the prompt cache's price of moving (``cache.PromptCache``).
    rebuilt_tokens: int = 0


@dataclass
class Run:
    """One policy's run over one trace: every turn's record, the resets, the samples."""

    policy: str
    trace: Trace
    records: list[TurnRecord]
    resets: list[ResetRecord]
    samples: list[tuple[datetime, dict[str, dict[str, float]]]]
    plan_tokens: dict[str, dict[str, int]]  # window -> subscription -> tokens counted
    metrics: Metrics = field(default_factory=Metrics)
    rebuilt_tokens: int = 0  # the world's ``cache.rebuilt`` at the run's end

    @cached_property
    def requests(self) -> list[RequestRecord]:
        """Every served request, in time order (ties: turn index, request order)."""
        out = []
        fleet = self.trace.fleet
        for record in self.records:
            turn = record.turn
            model = self.trace.model_of(turn)
            price = fleet.key_price(model)
            for served in record.result.served:
                part = turn.parts[served.request]
                on_key = served.rung.kind is RungKind.API_KEY
                out.append(
                    RequestRecord(
                        served.at,
                        record.index,
                        turn.agent,
                        part.tokens,
                        price,
                        served.rung,
                        served.plan_could_serve,
                        part.cached,
                        served.warm,
                        fleet.key_usd(model, part, warm=served.warm) if on_key else 0.0,
                    )
                )
        out.sort(key=lambda r: (r.at, r.turn))  # stable: a turn's requests keep their order
        return out

    def key_spend_curve(self) -> list[tuple[datetime, float]]:
        """Cumulative key spend in $ (what the key billed), one point per key-served
        request."""
        total, points = 0.0, [(self.trace.fleet.start, 0.0)]
        for request in self.requests:
            if request.rung.kind is RungKind.API_KEY:
                total += request.usd
                points.append((request.at, total))
        points.append((self.trace.fleet.end, total))
        return points


def _events(trace: Trace) -> list[tuple[datetime, int, int]]:
    fleet = trace.fleet
    events: list[tuple[datetime, int, int]] = []
    for index, spec in enumerate(fleet.subscriptions):
        for at, kind in ((spec.removed_at, REMOVE), (spec.revoked_at, REVOKE)):
            if at is not None and fleet.start <= at < fleet.end:
                events.append((at, kind, index))
    beat = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
    at, beat_index = fleet.start, 0
    while at < fleet.end:
        events.append((at, BEAT, beat_index))
        at += beat
        beat_index += 1
    events.extend((turn.at, TURN, index) for index, turn in enumerate(trace.turns))
    heapq.heapify(events)
    return events


def simulate(trace: Trace, policy_type: type[Policy], *, phased: bool = True) -> Run:
    """Run ``trace`` under one policy on a fresh simulated provider; returns its Run.

    ``phased=False`` runs the provider under the simulator's own window rule.
    """
    world = World(trace.fleet, phased=phased)
    policy = policy_type(trace, world)
    results: dict[int, TurnResult] = {}
    running: dict[int, TurnRun] = {}
    samples: list[tuple[datetime, dict[str, dict[str, float]]]] = []
    events = _events(trace)
    event = heapq.heappop(events)
    while True:
        at, kind, index = event
        if kind == TURN:
            generator = running.get(index)
            if generator is None:
                generator = running[index] = policy.run_turn(trace.turns[index], at)
            try:
                resume = next(generator)
            except StopIteration as ended:
                results[index] = ended.value
                del running[index]
            else:
                assert resume >= at, "a turn cannot resume in the past"
                # The same order as a push then a pop, without touching the heap when
                # this turn's next request comes first (the common case).
                event = heapq.heappushpop(events, (resume, TURN, index))
                continue
        elif kind == BEAT:
            policy.sweep(at)
            samples.append((at, world.utilization(at)))
        elif kind == REVOKE:
            world.revoke(trace.fleet.subscriptions[index].name, at)
        else:
            policy.plan_removed(index + 1, at)
        if not events:
            break
        event = heapq.heappop(events)
    world.flush(trace.fleet.end)
    run = Run(
        policy=policy.name,
        trace=trace,
        records=[TurnRecord(i, turn, results[i]) for i, turn in enumerate(trace.turns)],
        resets=[r for r in world.resets() if from_unix(r.at) <= trace.fleet.end],
        samples=samples,
        plan_tokens={w: dict(world.window_tokens(w)) for w in ("five_hour", "seven_day")},
        rebuilt_tokens=world.cache.rebuilt,
    )
    run.metrics = measure(run, notifications=policy.sent)
    run.metrics.parked = policy.parked
    # The key's bill is the world's; the records price each request as the world
    # decided it (warm or cold), so the two agree or the engine lost a request.
    assert math.isclose(run.metrics.key_usd, world.key_usd, rel_tol=1e-9, abs_tol=1e-9)
    return run


def _session_instants(trace: Trace) -> dict[str, list[float]]:
    """Each agent's request instants in the trace (unix seconds), ascending."""
    found: dict[str, list[float]] = defaultdict(list)
    for turn in trace.turns:
        for part in turn.parts:
            found[turn.agent].append(to_unix(turn.at + timedelta(seconds=part.offset)))
    for values in found.values():
        values.sort()
    return found


def _may_be_warm(instants: list[float], at: datetime) -> bool:
    """Whether a request at ``at`` could read a warm prefix in some schedule: another
    request of its session comes within the TTL before it (``cells.may_be_warm``)."""
    t = to_unix(at)
    return bisect_right(instants, t) - bisect_left(instants, t - TTL_SECONDS) >= 2


def _pct(unused: int, capacity: int) -> float:
    return 100.0 * unused / capacity if capacity else 0.0


def measure(run: Run, *, notifications: int) -> Metrics:
    """The figures of one run (docs/benchmarks.md defines each)."""
    m = Metrics(notifications=notifications)
    instants: dict[str, list[float]] = {}
    for record in run.records:
        result, turn = record.result, record.turn
        m.refusals += result.refusals
        if result.complete:
            m.completed += 1
            continue
        # The bench's key never refuses: a failed turn always had a credential.
        m.failed += 1
        m.failed_while_servable += 1
        left = turn.parts[result.next :]
        m.failed_requests += len(left)
        m.failed_tokens += sum(part.tokens for part in left)
        # Priced as the bound prices them (``cells.may_be_warm``): warm unless no
        # request of the agent's comes within the cache's TTL before it, so the failed
        # requests never lift a policy's floor above what it could have paid.
        model = run.trace.model_of(turn)
        instants = instants or _session_instants(run.trace)
        m.failed_usd += sum(
            run.trace.fleet.key_usd(
                model,
                part,
                warm=_may_be_warm(instants[turn.agent], turn.at + timedelta(seconds=part.offset)),
            )
            for part in left
        )
    m.rebuilt_tokens = run.rebuilt_tokens
    by_agent: dict[str, list[RequestRecord]] = defaultdict(list)
    for request in run.requests:
        by_agent[request.agent].append(request)
        if request.rung.kind is RungKind.API_KEY:
            m.key_tokens += request.tokens
            m.key_usd += request.usd
            m.key_requests_while_plan_served += request.plan_could_serve
    for window, attribute in (("five_hour", "five_hour"), ("seven_day", "seven_day")):
        resets = [r for r in run.resets if r.window == window and not r.revoked]
        unused = sum(r.unused for r in resets)
        setattr(m, f"unused_{attribute}_pct", _pct(unused, sum(r.capacity for r in resets)))
        if window == "seven_day":
            m.unused_seven_day_tokens = unused
    for requests in by_agent.values():
        switches, pongs = _switches(requests)
        m.switches += switches
        m.ping_pongs += pongs
        m.key_minutes_after_reset += _key_minutes(requests)
    return m


def _plans(requests: list[RequestRecord]) -> Iterator[tuple[int, datetime]]:
    """The plans that served an agent's requests, turn by turn in the order the turns
    started (a turn's own requests in time order). Not the raw time order: two of the
    agent's turns that overlap on two plans would read as a switch per interleaved
    request, where the agent moved once."""
    for request in sorted(requests, key=lambda r: (r.turn, r.at)):
        if request.rung.kind is RungKind.SUBSCRIPTION:
            assert request.rung.subscription_id is not None
            yield request.rung.subscription_id, request.at


def _switches(requests: list[RequestRecord]) -> tuple[int, int]:
    """Switches (a plan-served request on another plan than the agent's previous
    plan-served one, in ``_plans``' order) and ping-pongs (a switch A→B followed by the
    next switch B→A within two hours)."""
    switches = pongs = 0
    plan: int | None = None
    last: tuple[int, int, datetime] | None = None  # from, to, at
    for target, at in _plans(requests):
        if plan is not None and target != plan:
            switches += 1
            if last is not None and last[0] == target and last[1] == plan:
                if at - last[2] <= PING_PONG_WITHIN:
                    pongs += 1
            last = (plan, target, at)
        plan = target
    return switches, pongs


def _key_minutes(requests: list[RequestRecord]) -> float:
    """Minutes an agent stayed on the key after a plan could serve it again.

    From its first key-served request at which some plan would have served, until its
    next plan-served request (or a key request at which no plan could serve any more,
    or its last request).
    """
    minutes = 0.0
    since: datetime | None = None
    for request in requests:
        at = request.at
        if request.rung.kind is RungKind.API_KEY and request.plan_could_serve:
            if since is None:
                since = at
            continue
        if since is not None:
            minutes += (at - since).total_seconds() / 60
            since = None
    if since is not None and requests:
        minutes += (requests[-1].at - since).total_seconds() / 60
    return minutes
