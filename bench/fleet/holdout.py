"""Held-out runs: ``python -m bench.fleet --holdout N [--seed S]``.

Draws N traces the policy never saw (``families.holdout_trace(seed, i)``, the families
in turn) from a seed given at run time (random unless ``--seed``; printed first, so
the run can be repeated), keeps none of them (``--write DIR`` writes them, for
``--trace`` to replay one), and on each runs the lineup, solves the bounds in memory
under a time limit and checks the invariants (``report.check``). Traces run in
parallel on ``--workers`` processes (spawned: each boots Django itself). Prints one
row per trace, the distribution over the traces, and each held-out target as a PASS
or MISS line with its figures. Returns the outcomes; invariant breaks are in each
outcome's ``problems`` (the caller exits 1 on any).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import secrets
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

# The families module imports no Django: safe before a worker boots.
from bench.fleet.families import LIMITS, Limits

if TYPE_CHECKING:
    from bench.fleet.trace import Trace

# The lineups: this project and the outside baselines (the default: the targets
# compare only those, and the project's three variants would add ~60 % to the
# simulation time), or every policy (``lineup.POLICIES``).
LINEUPS = ("baselines", "all")
# The MILP's time limit per held-out trace: its dual bound is valid when cut short.
TIME_LIMIT_SECONDS = 5.0
WORKERS = 2
# The held-out targets.
SHARE_AT_MOST_EVERY_BASELINE = 0.95
EXCESS_OVER_BEST = 0.02
MEDIAN_RATIO, MAX_RATIO = 1.10, 1.30
MEDIAN_PING_PONGS = 1.0  # per agent-week
RUN_TRACES, RUN_SECONDS = 50, 600.0  # a 50-trace run under 10 minutes
TIE_USD = 1e-9  # two spends this close are equal


@dataclass(frozen=True)
class Outcome:
    """One held-out trace's figures (small and picklable: what a worker sends back)."""

    name: str
    family: str
    agents: int
    plans: int
    turns: int
    requests: int
    demand: float  # families.demand_ratio
    project_usd: float
    baselines: dict[str, float]  # outside baseline -> key $
    achievable_usd: float
    achievable_source: str
    ratio: float  # this project's key $ over the achievable's
    lower_usd: float
    lower_status: str
    failed_while_servable: int
    ping_pongs: int
    agent_weeks: float
    seconds: float
    bounds_seconds: float
    problems: tuple[str, ...] = field(default=())

    @property
    def best_baseline(self) -> tuple[str, float]:
        """The cheapest outside baseline (ties: lineup order) and its key $."""
        return min(self.baselines.items(), key=lambda item: item[1])

    @property
    def at_most_every_baseline(self) -> bool:
        return self.project_usd <= self.best_baseline[1] + TIE_USD

    @property
    def excess(self) -> float:
        """How far this project's key $ is above the best baseline's (a share; 0 when
        at or below it; inf when the baseline spent nothing and this project did)."""
        best = self.best_baseline[1]
        if self.project_usd <= best + TIE_USD:
            return 0.0
        return math.inf if best <= TIE_USD else self.project_usd / best - 1

    @property
    def ping_pongs_per_agent_week(self) -> float:
        return self.ping_pongs / self.agent_weeks if self.agent_weeks else 0.0


def _boot() -> None:
    """Django's settings for the simulation, unless this process has them already (a
    test's)."""
    from django.apps import apps

    if apps.ready:
        return
    from bench.fleet.__main__ import boot

    boot()


def policies_of(lineup: str) -> tuple[type, ...]:
    """The policies a lineup runs, in the lineup's order."""
    from bench.fleet.lineup import POLICIES
    from bench.fleet.project import ProjectPolicy
    from bench.fleet.report import BASELINES

    if lineup == "all":
        return POLICIES
    if lineup == "baselines":
        return tuple(p for p in POLICIES if p is ProjectPolicy or p.name in BASELINES)
    raise ValueError(f"unknown lineup {lineup!r} (known: {', '.join(LINEUPS)})")


def trace_outcome(
    trace: Trace, *, lineup: str = "baselines", time_limit: float = TIME_LIMIT_SECONDS
) -> Outcome:
    """Run ``lineup`` over ``trace`` (Django booted), solve its bounds in memory and
    check the runs; returns its ``Outcome``."""
    from bench.fleet.bounds import bounds_solve
    from bench.fleet.engine import simulate
    from bench.fleet.families import demand_ratio
    from bench.fleet.replay import schedule_replay
    from bench.fleet.report import BASELINES, Comparison, check
    from bench.fleet.tables import ping_pong_budget

    began = time.perf_counter()
    bounds = bounds_solve(trace, time_limit=time_limit)
    bounds_seconds = time.perf_counter() - began
    runs = tuple(simulate(trace, policy) for policy in policies_of(lineup))
    replays = tuple(schedule_replay(trace, run.requests) for run in runs)
    comparison = Comparison(trace, runs, bounds, replays)
    project = comparison.project.metrics
    achievable = comparison.achievable
    family = trace.fleet.name.rsplit("-", 2)[0]
    return Outcome(
        name=trace.fleet.name,
        family=family,
        agents=len(trace.fleet.agents),
        plans=len(trace.fleet.subscriptions),
        turns=len(trace.turns),
        requests=sum(len(t.parts) for t in trace.turns),
        demand=demand_ratio(trace),
        project_usd=project.key_usd,
        baselines={name: comparison.run_of(name).metrics.key_usd for name in BASELINES},
        achievable_usd=achievable.usd,
        achievable_source=achievable.source,
        ratio=comparison.ratio(project.key_usd),
        lower_usd=bounds.lower_usd,
        lower_status=bounds.lower_status,
        failed_while_servable=project.failed_while_servable,
        ping_pongs=project.ping_pongs,
        agent_weeks=ping_pong_budget(comparison),
        seconds=time.perf_counter() - began,
        bounds_seconds=bounds_seconds,
        problems=tuple(check(comparison)),
    )


def _drawn_outcome(job: tuple[int, int, str, float, Limits]) -> Outcome:
    """A worker's job: draw trace ``index`` of ``seed`` and run it."""
    from bench.fleet.families import holdout_trace

    seed, index, lineup, time_limit, limits = job
    trace = holdout_trace(seed, index, limits)
    return trace_outcome(trace, lineup=lineup, time_limit=time_limit)


def outcomes_of(
    seed: int,
    count: int,
    *,
    lineup: str = "baselines",
    time_limit: float = TIME_LIMIT_SECONDS,
    workers: int = WORKERS,
    limits: Limits = LIMITS,
) -> Iterable[Outcome]:
    """The outcomes of traces ``0..count-1`` of ``seed``, in index order, each as soon
    as it and those before it are done. ``workers`` > 1: spawned processes."""
    jobs = [(seed, index, lineup, time_limit, limits) for index in range(count)]
    if workers <= 1:
        _boot()
        yield from map(_drawn_outcome, jobs)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(workers, count), initializer=_boot) as pool:
        yield from pool.imap(_drawn_outcome, jobs)


def new_seed() -> int:
    """A run's seed when none is given: 32 random bits."""
    return secrets.randbits(32)


def traces_write(seed: int, count: int, directory: Path, limits: Limits = LIMITS) -> list[Path]:
    """Write traces ``0..count-1`` of ``seed`` to ``directory`` as ``<name>.jsonl``."""
    from bench.fleet.families import holdout_trace
    from bench.fleet.trace import trace_write

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for index in range(count):
        trace = holdout_trace(seed, index, limits)
        path = directory / f"{trace.fleet.name}.jsonl"
        trace_write(trace, path)
        written.append(path)
    return written


# Output


HEADER = (
    "| trace | agents | plans | turns (requests) | demand × | this project $ "
    "| best baseline $ | × achievable | lower bound $ | failed while servable "
    "| ping-pongs / agent-week | s |"
)
RULE = "|" + "---|" * 12


def row(outcome: Outcome) -> str:
    name, usd = outcome.best_baseline
    mark = "" if outcome.at_most_every_baseline else f" (+{100 * outcome.excess:.1f} %)"
    ratio = "∞" if math.isinf(outcome.ratio) else f"{outcome.ratio:.3f}"
    cells = [
        outcome.name,
        f"{outcome.agents}",
        f"{outcome.plans}",
        f"{outcome.turns:,} ({outcome.requests:,})",
        f"{outcome.demand:.2f}",
        f"{outcome.project_usd:.2f}{mark}",
        f"{name} {usd:.2f}",
        ratio,
        f"{outcome.lower_usd:.2f}" + ("" if _optimal(outcome) else " (time limit)"),
        f"{outcome.failed_while_servable}",
        f"{outcome.ping_pongs_per_agent_week:.2f}",
        f"{outcome.seconds:.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


def _optimal(outcome: Outcome) -> bool:
    """Whether the MILP was solved to optimality (else its dual bound at the limit)."""
    return "optimal" in outcome.lower_status.lower()


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    if math.isinf(ordered[low]) or math.isinf(ordered[high]):
        return ordered[high] if position > low else ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _spread(values: Sequence[float]) -> str:
    qs = (0.0, 0.1, 0.5, 0.9, 1.0)
    return " | ".join(f"{_quantile(values, q):.3f}" for q in qs)


def distribution(outcomes: Sequence[Outcome]) -> str:
    """Per figure, its minimum, 10th percentile, median, 90th percentile and maximum
    over the traces; then per family the median × achievable."""
    figures = (
        ("× achievable (this project)", [o.ratio for o in outcomes]),
        ("this project $ / best baseline $", [_over_best(o) for o in outcomes]),
        ("demand × what the plans can serve", [o.demand for o in outcomes]),
        ("ping-pongs per agent-week", [o.ping_pongs_per_agent_week for o in outcomes]),
        ("lower bound / achievable", [_lower_share(o) for o in outcomes]),
    )
    lines = ["| figure | min | p10 | median | p90 | max |", "|---|---|---|---|---|---|"]
    lines.extend(f"| {label} | {_spread(values)} |" for label, values in figures)
    families = sorted({o.family for o in outcomes})
    lines.extend(["", "| family | traces | median × achievable | at most every baseline |"])
    lines.append("|---|---|---|---|")
    for family in families:
        mine = [o for o in outcomes if o.family == family]
        beaten = sum(o.at_most_every_baseline for o in mine)
        median = statistics.median(o.ratio for o in mine)
        lines.append(f"| {family} | {len(mine)} | {median:.3f} | {beaten} of {len(mine)} |")
    return "\n".join(lines)


def _over_best(outcome: Outcome) -> float:
    best = outcome.best_baseline[1]
    if best <= TIE_USD:
        return 1.0 if outcome.project_usd <= TIE_USD else math.inf
    return outcome.project_usd / best


def _lower_share(outcome: Outcome) -> float:
    return outcome.lower_usd / outcome.achievable_usd if outcome.achievable_usd > TIE_USD else 1.0


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def verdicts(outcomes: Sequence[Outcome], wall_seconds: float) -> list[tuple[bool, str]]:
    """Each held-out target measured: (met, the line that says so with its figures)."""
    n = len(outcomes)
    at_most = sum(o.at_most_every_baseline for o in outcomes)
    worst = max(outcomes, key=lambda o: o.excess)
    ratios = [o.ratio for o in outcomes]
    highest = max(outcomes, key=lambda o: o.ratio)
    failed = sum(o.failed_while_servable for o in outcomes)
    pongs = statistics.median(o.ping_pongs_per_agent_week for o in outcomes)
    per_trace = wall_seconds / n
    projected = per_trace * RUN_TRACES
    missed = ", ".join(
        f"{o.name} ({o.best_baseline[0]} by ${o.project_usd - o.best_baseline[1]:.2f})"
        for o in outcomes
        if not o.at_most_every_baseline
    )
    excess = "∞" if math.isinf(worst.excess) else f"{100 * worst.excess:.2f} %"
    return [
        (
            at_most >= SHARE_AT_MOST_EVERY_BASELINE * n,
            f"key $ ≤ every baseline's on ≥ {100 * SHARE_AT_MOST_EVERY_BASELINE:g} % of the "
            f"traces: {at_most} of {n} ({100 * at_most / n:.1f} %)"
            + (f"; above on {missed}" if missed else ""),
        ),
        (
            worst.excess <= EXCESS_OVER_BEST + 1e-9,  # 2 % itself is within
            f"never more than {100 * EXCESS_OVER_BEST:g} % above the best baseline: worst "
            f"{excess}" + (f" ({worst.name}, {worst.best_baseline[0]})" if worst.excess else ""),
        ),
        (
            statistics.median(ratios) <= MEDIAN_RATIO,
            f"median ≤ {MEDIAN_RATIO:.2f} × achievable: {statistics.median(ratios):.3f}",
        ),
        (
            highest.ratio <= MAX_RATIO,
            f"max ≤ {MAX_RATIO:.2f} × achievable: {highest.ratio:.3f} ({highest.name})",
        ),
        (failed == 0, f"0 turns failed while a credential could serve: {failed}"),
        (
            pongs <= MEDIAN_PING_PONGS,
            f"median ping-pongs ≤ {MEDIAN_PING_PONGS:g} per agent-week: {pongs:.2f}",
        ),
        (
            projected < RUN_SECONDS,
            f"a {RUN_TRACES}-trace run < {RUN_SECONDS / 60:g} min: {wall_seconds:.0f} s for {n}"
            + (f", {projected:.0f} s projected for {RUN_TRACES}" if n != RUN_TRACES else ""),
        ),
    ]


def holdout_main(
    count: int,
    seed: int | None,
    *,
    lineup: str = "baselines",
    time_limit: float = TIME_LIMIT_SECONDS,
    workers: int = WORKERS,
    write: Path | None = None,
    limits: Limits = LIMITS,
) -> int:
    """Run and print a held-out run; returns the exit status (1: an invariant broke)."""
    given = seed is not None
    seed = new_seed() if seed is None else seed
    print(
        f"Held-out run: {count} trace(s) from seed {seed} ({'given' if given else 'random'}; "
        f"repeat with --holdout {count} --seed {seed}), lineup {lineup}, MILP time limit "
        f"{time_limit:g} s, {workers} worker(s)",
        flush=True,
    )
    print(flush=True)
    if write is not None:
        for path in traces_write(seed, count, write, limits):
            print(f"wrote {path}")
        print(flush=True)
    started, cpu = time.perf_counter(), time.process_time()
    print(HEADER)
    print(RULE, flush=True)
    outcomes: list[Outcome] = []
    for outcome in outcomes_of(
        seed, count, lineup=lineup, time_limit=time_limit, workers=workers, limits=limits
    ):
        outcomes.append(outcome)
        print(row(outcome), flush=True)
    wall = time.perf_counter() - started
    print()
    print("Distribution over the traces:")
    print()
    print(distribution(outcomes))
    print()
    print("Held-out targets, measured:")
    print()
    for met, line in verdicts(outcomes, wall):
        print(f"{_verdict(met)}  {line}")
    print()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    bounds = sum(o.bounds_seconds for o in outcomes)
    print(
        f"{count} held-out trace(s) from seed {seed} in {wall:.1f} s wall "
        f"({sum(o.seconds for o in outcomes):.0f} s in the workers, {bounds:.0f} s of it "
        f"the bounds; {time.process_time() - cpu:.1f} s CPU here; {os.cpu_count()} CPUs, "
        f"load {load})"
    )
    cut = sum(not _optimal(o) for o in outcomes)
    print(f"The MILP reached its {time_limit:g} s limit on {cut} of {count} traces (their lower")
    print("bound is its dual bound then: valid, and looser).")
    problems = [f"{o.name}: {p}" for o in outcomes for p in o.problems]
    for problem in problems:
        print(f"INVARIANT BROKEN: {problem}", file=sys.stderr)
    return 1 if problems else 0
