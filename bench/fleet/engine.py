"""The discrete-event loop and the metrics of one policy's run over one trace.

Events, in time order (ties: revocations, then the sampler's beat, then turns in
trace order): a revocation flips the simulator's credential; a beat every
``TRINITY_HEADROOM_SAMPLE_SECONDS`` lets the policy's sampler probe (only this
project's reads headroom) and samples every window for the plots; a turn runs to
its end on the policy's credentials. The clock is the simulator's, set to each
event's instant; nothing sleeps and nothing is random, so a run is a function of
its trace.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from agents.rung import RungKind
from bench.fleet.policies import Policy, TurnResult
from bench.fleet.trace import Trace, Turn
from bench.fleet.world import ResetRecord, World, from_unix

# A switch back to where the agent came from within this long is a ping-pong.
PING_PONG_WITHIN = timedelta(hours=2)


@dataclass(frozen=True)
class TurnRecord:
    index: int
    turn: Turn
    result: TurnResult
    # Whether some plan would have served this turn at its instant (before it ran).
    plan_could_serve: bool


@dataclass
class Metrics:
    completed: int = 0
    failed: int = 0
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
    key_turns_while_plan_served: int = 0
    refusals: int = 0
    failed_while_servable: int = 0
    failed_tokens: int = 0


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

    def key_spend_curve(self) -> list[tuple[datetime, float]]:
        """Cumulative key spend in $, one point per key-served turn."""
        price = self.trace.fleet.key_usd_per_mtok / 1e6
        total, points = 0.0, [(self.trace.fleet.start, 0.0)]
        for record in self.records:
            served = record.result.served_by
            if served is not None and served.kind is RungKind.API_KEY:
                total += record.turn.tokens * price
                points.append((record.turn.at, total))
        points.append((self.trace.fleet.end, total))
        return points


def _events(trace: Trace) -> list[tuple[datetime, int, int, str]]:
    fleet = trace.fleet
    events: list[tuple[datetime, int, int, str]] = []
    for index, spec in enumerate(fleet.subscriptions):
        if spec.revoked_at is not None and fleet.start <= spec.revoked_at < fleet.end:
            events.append((spec.revoked_at, 0, index, "revoke"))
    beat = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
    at, beat_index = fleet.start, 0
    while at < fleet.end:
        events.append((at, 1, beat_index, "beat"))
        at += beat
        beat_index += 1
    events.extend((turn.at, 2, index, "turn") for index, turn in enumerate(trace.turns))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return events


def simulate(trace: Trace, policy_type: type[Policy]) -> Run:
    """Run ``trace`` under one policy on a fresh simulated provider; returns its Run."""
    world = World(trace.fleet)
    policy = policy_type(trace, world)
    records: list[TurnRecord] = []
    samples: list[tuple[datetime, dict[str, dict[str, float]]]] = []
    for at, _, index, kind in _events(trace):
        if kind == "revoke":
            world.revoke(trace.fleet.subscriptions[index].name, at)
        elif kind == "beat":
            policy.sweep(at)
            samples.append((at, world.utilization(at)))
        else:
            turn = trace.turns[index]
            could = world.could_serve(trace.model_of(turn), at)
            records.append(TurnRecord(index, turn, policy.run_turn(turn, at), could))
    world.flush(trace.fleet.end)
    run = Run(
        policy=policy.name,
        trace=trace,
        records=records,
        resets=[r for r in world.resets() if from_unix(r.at) <= trace.fleet.end],
        samples=samples,
        plan_tokens={w: dict(world.window_tokens(w)) for w in ("five_hour", "seven_day")},
    )
    run.metrics = measure(run, notifications=policy.sent)
    return run


def _pct(unused: int, capacity: int) -> float:
    return 100.0 * unused / capacity if capacity else 0.0


def measure(run: Run, *, notifications: int) -> Metrics:
    """The figures of one run (docs/benchmarks.md defines each)."""
    fleet = run.trace.fleet
    price = fleet.key_usd_per_mtok / 1e6
    m = Metrics(notifications=notifications)
    by_agent: dict[str, list[TurnRecord]] = defaultdict(list)
    for record in run.records:
        by_agent[record.turn.agent].append(record)
        result = record.result
        m.refusals += result.refusals
        served = result.served_by
        if served is None:
            m.failed += 1
            m.failed_tokens += record.turn.tokens
            # The bench's key never refuses: a failed turn always had a credential.
            m.failed_while_servable += 1
            continue
        m.completed += 1
        if served.kind is RungKind.API_KEY:
            m.key_tokens += record.turn.tokens
            if record.plan_could_serve:
                m.key_turns_while_plan_served += 1
    m.key_usd = m.key_tokens * price
    for window, attribute in (("five_hour", "five_hour"), ("seven_day", "seven_day")):
        resets = [r for r in run.resets if r.window == window and not r.revoked]
        unused = sum(r.unused for r in resets)
        setattr(m, f"unused_{attribute}_pct", _pct(unused, sum(r.capacity for r in resets)))
        if window == "seven_day":
            m.unused_seven_day_tokens = unused
    for records in by_agent.values():
        switches, pongs = _switches(records)
        m.switches += switches
        m.ping_pongs += pongs
        m.key_minutes_after_reset += _key_minutes(records)
    return m


def _switches(records: list[TurnRecord]) -> tuple[int, int]:
    """Switches (a plan-served turn on another plan than the agent's previous one) and
    ping-pongs (a switch A→B followed by the next switch B→A within two hours)."""
    switches = pongs = 0
    plan: int | None = None
    last: tuple[int, int, datetime] | None = None  # from, to, at
    for record in records:
        served = record.result.served_by
        if served is None or served.kind is not RungKind.SUBSCRIPTION:
            continue
        target = served.subscription_id
        assert target is not None
        if plan is not None and target != plan:
            switches += 1
            at = record.turn.at
            if last is not None and last[0] == target and last[1] == plan:
                if at - last[2] <= PING_PONG_WITHIN:
                    pongs += 1
            last = (plan, target, at)
        plan = target
    return switches, pongs


def _key_minutes(records: list[TurnRecord]) -> float:
    """Minutes an agent stayed on the key after a plan could serve it again.

    From its first key-served turn at which some plan would have served, until its
    next plan-served turn (or a key turn at which no plan could serve any more, or
    its last turn).
    """
    minutes = 0.0
    since: datetime | None = None
    last_at: datetime | None = None
    for record in records:
        served = record.result.served_by
        at = record.turn.at
        last_at = at
        if served is None:
            continue
        on_key = served.kind is RungKind.API_KEY
        if on_key and record.plan_could_serve:
            if since is None:
                since = at
            continue
        if since is not None:
            minutes += (at - since).total_seconds() / 60
            since = None
    if since is not None and last_at is not None:
        minutes += (last_at - since).total_seconds() / 60
    return minutes
