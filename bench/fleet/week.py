"""The week plan in the fleet benchmark: this project's planning task, from memory.

Every ``EVERY`` of simulated time the project's policy builds the inputs the planning
task would gather (``subscriptions/week_planning.py``) from what it holds: each
present plan's stored reading (a token refusing its probe, or a plan an admin paused,
is no plan to plan on), each window's capacity learned from the tokens the plan served
in it (``capacity_estimate`` over the plan type's nominal), each agent's demand
profile from its turns so far, the key's price per family. It solves them with the
product's ``plan_week`` and answers ``Ask.PLANNED`` with the agent's entry: the turn
planner itself follows or ignores it, as in production.

The product solves every 5 minutes and when a plan or agent changes; the benchmark
every ``EVERY`` (an hour), to keep a week's run in seconds.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from datetime import datetime, timedelta

from bench.fleet.trace import Trace
from bench.fleet.world import World
from routing.headroom.reading import Reading, ReadingStatus
from routing.plan_ahead.inputs import (
    AgentDemand,
    PlanState,
    WeekInputs,
    WindowState,
    capacity_estimate,
    demand_profile,
    nominal_capacity,
    window_state,
)
from routing.plan_ahead.solve import plan_week
from routing.plan_ahead.week_plan import Planned, WeekPlan
from simulator.state import model_family

EVERY = timedelta(hours=1)


class WeekPlanner:
    """What the planning task knows in the benchmark, and its last plan."""

    def __init__(self, trace: Trace, world: World) -> None:
        self.trace = trace
        self.world = world
        self.ids = {a.name: i for i, a in enumerate(trace.fleet.agents, start=1)}
        self.turns: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
        # Per plan, the instants and running token sums of the requests it served.
        self.served_at: dict[int, list[datetime]] = defaultdict(list)
        self.served_sum: dict[int, list[float]] = defaultdict(list)
        # Per plan and window: the first reading of its current period (its reset, when
        # it was read, its utilization then): what a capacity is learned from.
        self.first_seen: dict[tuple[int, str], tuple[datetime | None, datetime, float]] = {}
        self.plan: WeekPlan | None = None
        self.solved_at: datetime | None = None
        self.solves = 0

    def turn_started(self, agent: str, at: datetime, tokens: float) -> None:
        self.turns[agent].append((at, tokens))

    def served(self, subscription_id: int, at: datetime, tokens: float) -> None:
        sums = self.served_sum[subscription_id]
        self.served_at[subscription_id].append(at)
        sums.append((sums[-1] if sums else 0.0) + tokens)

    def observe(self, readings: dict[int, Reading]) -> None:
        """Keep the first reading of each window's current period (the sampler's
        history, as ``HeadroomSample`` rows keep it in production)."""
        for pk, reading in readings.items():
            if not reading.answered:
                continue
            for name, found in reading.windows.items():
                if found.utilization is None:
                    continue
                first = self.first_seen.get((pk, name))
                if first is None or first[0] != found.resets_at:
                    self.first_seen[(pk, name)] = (
                        found.resets_at,
                        reading.fetched_at,
                        float(found.utilization),
                    )

    def due(self, now: datetime) -> bool:
        return self.solved_at is None or now - self.solved_at >= EVERY

    def solve(
        self,
        now: datetime,
        snapshots: dict[int, Reading],
        assignment: dict[str, int | None],
        moved: dict[str, tuple[datetime, int]],
    ) -> None:
        inputs = WeekInputs(
            now=now,
            plans=tuple(self._plans(now, snapshots)),
            agents=tuple(self._agents(now, assignment, moved)),
            prices={
                None: self.trace.fleet.key_usd_per_mtok,
                **{f: p for f, p in self.trace.fleet.key_prices.items()},
            },
        )
        self.plan = plan_week(inputs)
        self.solved_at = now
        self.solves += 1

    def entry(self, agent: str) -> Planned | None:
        return self.plan.entry(self.ids[agent]) if self.plan is not None else None

    def _plans(self, now: datetime, snapshots: dict[int, Reading]):
        for pk in self.world.present_ids(now):
            if self.world.paused(pk, now):
                continue
            reading = snapshots.get(pk)
            if reading is not None and reading.status is ReadingStatus.INVALID_TOKEN:
                continue
            spec = self.trace.fleet.subscriptions[pk - 1]
            windows = (
                self._read_windows(pk, spec.plan_type, reading, now)
                if reading is not None
                else self._nominal_windows(spec.plan_type, now)
            )
            yield PlanState(pk, spec.name, tuple(windows))

    def _read_windows(
        self, pk: int, plan_type: str, reading: Reading, now: datetime
    ) -> list[WindowState]:
        """Each window the reading shows, with a capacity learned from how far it rose
        since the period's first reading against what the plan served since then."""
        windows = []
        for name, found in reading.windows.items():
            first = self.first_seen.get((pk, name))
            served, rise = 0.0, None
            if first is not None and first[0] == found.resets_at and found.utilization:
                served = self._served_since(pk, first[1]) - self._served_since(
                    pk, reading.fetched_at
                )
                rise = float(found.utilization) - first[2]
            capacity = capacity_estimate(served, rise, nominal=nominal_capacity(plan_type, name))
            state = window_state(
                name,
                utilization=found.utilization,
                resets_at=found.resets_at,
                capacity=capacity,
                now=now,
            )
            if state is not None:
                windows.append(state)
        return windows

    @staticmethod
    def _nominal_windows(plan_type: str, now: datetime) -> list[WindowState]:
        """A plan nothing was read of: its nominal windows, all left."""
        windows = []
        for name in ("five_hour", "seven_day"):
            capacity = nominal_capacity(plan_type, name)
            state = window_state(name, utilization=None, resets_at=None, capacity=capacity, now=now)
            if state is not None:
                windows.append(state)
        return windows

    def _agents(self, now, assignment, moved):
        for spec in self.trace.fleet.agents:
            last = moved.get(spec.name)
            yield AgentDemand(
                id=self.ids[spec.name],
                name=spec.name,
                family=model_family(spec.model),
                assigned=assignment.get(spec.name),
                hourly=demand_profile(
                    self.turns.get(spec.name, ()), now=now, since=self.trace.fleet.start
                ),
                moved_at=last[0] if last is not None else None,
            )

    def _served_since(self, pk: int, since: datetime) -> float:
        instants, sums = self.served_at.get(pk), self.served_sum.get(pk)
        if not instants or sums is None:
            return 0.0
        i = bisect_left(instants, since)
        return sums[-1] - (sums[i - 1] if i > 0 else 0.0)


def _period(name: str) -> timedelta:
    return timedelta(hours=5) if name == "five_hour" else timedelta(days=7)
