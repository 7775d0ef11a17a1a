"""Rank 10,000 subscriptions in one call (≤ 25 ms), and selection end to end.

    .venv/bin/python bench/ranking.py
    BENCH_DATABASE_URL=postgres://... BENCH_REDIS_URL=redis://.../N \
        .venv/bin/python bench/ranking.py

Measures, side by side: the ranking itself (the rules over 10,000 candidates and their
decoded readings), banded and balanced; the store read of 10,000 snapshots (one MGET,
cold: every value decoded, and warm: decoded once per process); then
``rank_alternatives`` end to end (one SQL query, one cache read, decoding, ranking)
over fleets of 500, 2,000 and 10,000 subscriptions, against issue #11's targets
(≤ 3 ms at 500, ≤ 50 ms at 10,000, linear in between). Median and p95 over repeated
runs. On Postgres it runs in a throwaway database beside the one named (dropped after).

``--candidate PATH`` measures this checkout and another one (PATH, with its own
``.venv``: the base of a change, say) side by side instead, in one run: one worker
process per checkout (``bench/_ranking_worker.py``), each with the 10,000 fleet in its
own throwaway database, asked in turn for each figure, the order swapping every round
(ABBA), so the machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _setup import backends, boot, line, throwaway_postgres

N = 10_000
TARGET_MS = 25.0
RUNS = 30
# rank_alternatives end to end: (fleet size, target ms); linear in between.
E2E_TARGETS = ((500, 3.0), (2_000, 3.0 + (50.0 - 3.0) * (2_000 - 500) / (10_000 - 500)), (N, 50.0))
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def timed(fn: Callable[[], object], runs: int = RUNS) -> tuple[float, float, float]:
    """Median wall ms, p95 wall ms, median CPU ms; each run starts after a full collection."""
    fn()  # warm up
    wall, cpu = [], []
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    wall.sort()
    return statistics.median(wall), wall[int(len(wall) * 0.95) - 1], statistics.median(cpu)


def fleet_readings(ids: list[int]) -> dict[int, object]:
    """A realistic mix: mostly fresh serving readings, some stale, limited, reset, unread."""
    try:
        from routing.headroom.reading import Reading, ReadingStatus, WindowReading
    except ImportError:  # a checkout from before the routing core was its own package
        from subscriptions.headroom.reading import (  # type: ignore[no-redef]
            Reading,
            ReadingStatus,
            WindowReading,
        )

    rng = random.Random(4)
    readings: dict[int, object] = {}
    for pk in ids:
        roll = rng.random()
        if roll < 0.05:
            continue  # never read
        age = timedelta(seconds=rng.randint(0, 3000))
        five = round(rng.uniform(0, 100), 1)
        seven = round(rng.uniform(0, 100), 1)
        status = ReadingStatus.OK
        five_status = "allowed_warning" if five >= 80 else "allowed"
        reset_in = timedelta(hours=rng.uniform(0.1, 5))
        if roll > 0.90:
            status, five, five_status = ReadingStatus.RATE_LIMITED, 100.0, "rejected"
            if roll > 0.95:
                reset_in = -timedelta(minutes=5)  # a window that has reset since
        if 0.85 < roll <= 0.90:
            age = timedelta(hours=3)  # stale
        readings[pk] = Reading(
            fetched_at=NOW - age,
            status=status,
            windows={
                "five_hour": WindowReading(five, NOW + reset_in, five_status),
                "seven_day": WindowReading(seven, NOW + timedelta(days=3), "allowed"),
                "seven_day_sonnet": WindowReading(seven / 2, NOW + timedelta(days=3), "allowed"),
            },
            source="probe",
            reset_at=NOW + reset_in if status is ReadingStatus.RATE_LIMITED else None,
        )
    return readings


def fleet_create(
    ids: list[int], *, owner: Any, token: Any, failed_at: datetime, rng: random.Random
) -> None:
    """Subscriptions ``ids`` (``plan-<id>``), half as many agents each on one of them at
    random, every tenth subscription refused at ``failed_at``; on Postgres the tables
    vacuumed, as autovacuum keeps them (no dead rows from a previous fleet)."""
    from django.db import connection

    from agents.models import Agent
    from subscriptions.models import RateLimitEvent, Subscription

    Subscription.objects.bulk_create(
        [
            Subscription(
                pk=pk,
                name=f"plan-{pk:05d}",
                provider="anthropic",
                plan_type="max-20x",
                token=token,
                token_fingerprint=token.fingerprint,
            )
            for pk in ids
        ],
        batch_size=1000,
    )
    # A checkout whose agents carry a unique runtime key (per-owner names) needs one
    # each: bulk_create skips the save() that would set it.
    keyed = any(f.name == "runtime_key" for f in Agent._meta.get_fields())
    Agent.objects.bulk_create(
        [
            Agent(
                name=f"agent-{i}",
                owner=owner,
                subscription_id=rng.choice(ids),
                shared_secret=token,
                **({"runtime_key": f"agent-{i}"} if keyed else {}),
            )
            for i in range(len(ids) // 2)
        ],
        batch_size=1000,
    )
    RateLimitEvent.objects.bulk_create(
        [
            RateLimitEvent(agent_name="agent-0", subscription_id=pk, occurred_at=failed_at)
            for pk in ids[9::10]
        ],
        batch_size=1000,
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidate", type=Path, help="another checkout, measured beside")
    parser.add_argument("--rounds", type=int, default=10, help="ABBA rounds (--candidate)")
    parser.add_argument("--runs", type=int, default=3, help="runs a side per round")
    args = parser.parse_args()
    if args.candidate is not None:
        side_by_side(args.candidate, rounds=args.rounds, runs=args.runs)
        return
    url = os.environ.get("BENCH_DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        # A fresh database beside the one named, dropped after: no bloat from a past run.
        with throwaway_postgres(url) as fresh:
            run(database_url=fresh)
    else:
        run(database_url=None)


def run(*, database_url: str | None) -> None:
    boot(database_url=database_url)
    from django.contrib.auth.models import User

    from trinity.crypto import Secret

    rng = random.Random(7)
    inputs = ranking_inputs(rng)
    rank_one_call(inputs)
    token = Secret("sk-ant-oat01-bench-" + "x" * 40)
    fleet_empty()
    User.objects.filter(username="bench").delete()
    owner = User.objects.create(username="bench")
    for size, target in E2E_TARGETS:
        fleet_figures(size, target, inputs=inputs, owner=owner, token=token, rng=rng)
    fleet_empty()
    owner.delete()


@dataclass(frozen=True)
class RankingInputs:
    """The N candidates in load-balance order, their readings and the admission they
    are ranked under; every tenth subscription refused at ``failed_at``."""

    ids: list[int]
    candidates: list[Any]  # routing's Candidate
    readings: dict[int, object]
    admission: Any  # routing's Admission
    failed_at: datetime


def ranking_inputs(rng: random.Random) -> RankingInputs:
    """N candidates with agent counts drawn from ``rng``, and their readings."""
    from routing.eligibility import Admission, Candidate
    from subscriptions.plan_facts import fresh_for

    ids = list(range(1, N + 1))
    failed_at = NOW - timedelta(minutes=30)
    # In load-balance order and allocated in that order, as candidates_read builds them
    # from the ordered query.
    counts = {pk: rng.randint(0, 5) for pk in ids}
    order = sorted(ids, key=lambda pk: (counts[pk], f"plan-{pk:05d}"))
    candidates = [
        Candidate(pk, f"plan-{pk:05d}", counts[pk], failed_at if pk % 10 == 0 else None)
        for pk in order
    ]
    # Built in candidate order, as the store decodes them for rank_alternatives (one
    # get_many over the candidates' keys): memory order matters at this size.
    readings = fleet_readings([c.subscription_id for c in candidates])
    admission = Admission(
        now=NOW, provider="anthropic", max_age=fresh_for(), family="seven_day_sonnet"
    )
    return RankingInputs(ids, candidates, readings, admission, failed_at)


def rank_one_call(inputs: RankingInputs) -> None:
    """``rank_candidates`` over every candidate in one call, banded and balanced: timed,
    and printed under the run's headline."""
    from routing.headroom.ranking import BALANCED, rank_candidates

    candidates, readings, admission = inputs.candidates, inputs.readings, inputs.admission

    def rank() -> object:
        return rank_candidates(candidates, readings, admission)

    rank_median, rank_p95, rank_cpu = timed(rank)
    balanced_median, _, _ = timed(
        lambda: rank_candidates(candidates, readings, admission, strategy=BALANCED)
    )

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"bench/ranking.py: {N:,} subscriptions; {backends()}; {os.cpu_count()} CPUs, load {load}"
    )
    print(line("rank_candidates, one call: wall (median)", rank_median, TARGET_MS, "ms"))
    print(line("rank_candidates, one call: wall (p95)", rank_p95, TARGET_MS, "ms"))
    print(line("rank_candidates, one call: CPU (median)", rank_cpu, TARGET_MS, "ms"))
    print(line("rank_candidates, balanced strategy: wall (median)", balanced_median, None, "ms"))


def fleet_empty() -> None:
    """No subscription, agent or refusal left in the database."""
    from agents.models import Agent
    from subscriptions.models import RateLimitEvent, Subscription

    # Raw deletes, children first: no collection of 10,000 rows (and no decrypting
    # of secrets another run wrote with another key).
    for model in (RateLimitEvent, Agent, Subscription):
        model.objects.all()._raw_delete(model.objects.db)


def fleet_figures(
    size: int,
    target: float,
    *,
    inputs: RankingInputs,
    owner: Any,
    token: Any,
    rng: random.Random,
) -> None:
    """A fresh fleet of ``size`` in the database and the store, its selection end to end
    timed against ``target`` and printed; its snapshots deleted after."""
    from django.core.cache import cache

    from agents.models import Agent
    from subscriptions.headroom import store
    from subscriptions.headroom.selection import rank_alternatives
    from subscriptions.headroom.store import snapshot_key, snapshots_write

    fleet_empty()
    store._decoded.clear()
    fleet_ids = inputs.ids[:size]
    fleet_create(fleet_ids, owner=owner, token=token, failed_at=inputs.failed_at, rng=rng)
    snapshots_write({pk: inputs.readings[pk] for pk in fleet_ids if pk in inputs.readings})
    agent = Agent.objects.create(
        name="bench-agent", owner=owner, model="claude-sonnet-4-5", shared_secret=token
    )
    fleet_timed(fleet_ids, agent).print(size, target)
    reason = rank_alternatives(agent=agent, now=NOW).reason()
    print(
        f"  ranked {reason['candidate_count']:,}, last resort "
        f"{reason['last_resort_count']:,}, dropped {reason['dropped_count']:,}; first: "
        f"tier={reason['tier']} 7d={reason['seven_day']} age={reason['reading_age_seconds']}s"
    )
    cache.delete_many([snapshot_key(pk) for pk in fleet_ids])


@dataclass(frozen=True)
class FleetFigures:
    """Selection over one fleet, end to end and by part (ms, wall medians unless named)."""

    sql: float
    store_cold: float
    store_warm: float
    e2e: float
    e2e_p95: float
    e2e_cpu: float  # CPU median
    e2e_balanced: float
    e2e_cold_store: float

    def print(self, size: int, target: float) -> None:
        """The figures of a fleet of ``size``, end to end against ``target``."""
        print(f"-- {size:,} subscriptions, {size // 2:,} agents, 10 % skip-listed")
        print(line(f"  candidates_read (SQL), {size:,}", self.sql, None, "ms"))
        print(
            line(
                f"  store read of {size:,}, cold (every value decoded)", self.store_cold, None, "ms"
            )
        )
        print(line(f"  store read of {size:,}, warm (decoded once)", self.store_warm, None, "ms"))
        e2e = f"  rank_alternatives {size:,}"
        print(line(f"{e2e}, end to end: wall (median)", self.e2e, target, "ms"))
        print(line(f"{e2e}, end to end: wall (p95)", self.e2e_p95, None, "ms"))
        print(line(f"{e2e}, end to end: CPU (median)", self.e2e_cpu, None, "ms"))
        print(line(f"{e2e}, balanced: wall (median)", self.e2e_balanced, target, "ms"))
        print(line(f"{e2e}, cold store: wall (median)", self.e2e_cold_store, None, "ms"))


def fleet_timed(fleet_ids: list[int], agent: Any) -> FleetFigures:
    """The store read (cold and warm), the SQL, and ``rank_alternatives`` for ``agent``
    (banded, balanced, and banded from a cold store), each timed."""
    from routing.headroom.ranking import BALANCED, BANDED
    from subscriptions.headroom import store
    from subscriptions.headroom.selection import rank_alternatives
    from subscriptions.headroom.store import snapshots_read
    from subscriptions.plan_facts import candidates_read

    def cold() -> object:
        store._decoded.clear()  # every value decoded again, as after a sweep
        return snapshots_read(fleet_ids)

    def e2e_cold() -> object:
        store._decoded.clear()
        return rank_alternatives(agent=agent, now=NOW, strategy=BANDED)

    cold_median, _, _ = timed(cold, runs=10)
    warm_median, _, _ = timed(lambda: snapshots_read(fleet_ids), runs=10)
    sql_median, _, _ = timed(lambda: candidates_read(provider="anthropic", now=NOW), runs=10)
    e2e_median, e2e_p95, e2e_cpu = timed(
        lambda: rank_alternatives(agent=agent, now=NOW, strategy=BANDED), runs=20
    )
    e2e_balanced, _, _ = timed(
        lambda: rank_alternatives(agent=agent, now=NOW, strategy=BALANCED), runs=20
    )
    cold_e2e, _, _ = timed(e2e_cold, runs=10)
    return FleetFigures(
        sql=sql_median,
        store_cold=cold_median,
        store_warm=warm_median,
        e2e=e2e_median,
        e2e_p95=e2e_p95,
        e2e_cpu=e2e_cpu,
        e2e_balanced=e2e_balanced,
        e2e_cold_store=cold_e2e,
    )


# What the side-by-side run asks each worker for, with its target (ms, wall).
SIDE_FIGURES = (
    ("e2e_balanced", "rank_alternatives, balanced, end to end", 50.0),
    ("e2e_banded", "rank_alternatives, banded, end to end", 50.0),
    ("sql", "the provider's plans (SQL)", None),
    ("store", "store read, warm", None),
    ("rank_balanced", "rank_candidates, balanced", None),
    ("rank_banded", "rank_candidates, banded", TARGET_MS),
)


def side_by_side(candidate: Path, *, rounds: int, runs: int) -> None:
    """This checkout and ``candidate`` interleaved, figure by figure (see the module doc)."""
    root = Path(__file__).resolve().parent.parent
    worker = Path(__file__).resolve().parent / "_ranking_worker.py"
    sides = {
        "this": (sys.executable, root),
        "candidate": (candidate / ".venv/bin/python", candidate),
    }
    procs = {
        name: subprocess.Popen(
            [str(python), str(worker), "--root", str(tree)],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, (python, tree) in sides.items()
    }
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for name, proc in procs.items():
            if proc.stdout is None or proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"the {name} worker did not start")
        for done in range(rounds):
            order = list(procs) if done % 2 == 0 else list(reversed(procs))
            for figure, _, _ in SIDE_FIGURES:
                for name in order:
                    samples.setdefault((name, figure), []).extend(_ask(procs[name], figure, runs))
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in procs.values():
            proc.wait(timeout=120)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"bench/ranking.py --candidate {candidate}: {N:,} subscriptions, {rounds} ABBA rounds")
    print(f"of {runs} runs a side; {os.cpu_count()} CPUs, load {load}; medians, ms (wall / CPU)")
    print(f"{'figure':<42} {'this':>15} {'candidate':>15}  target  ratio (this, wall)")
    for figure, label, target in SIDE_FIGURES:
        this, other = samples[("this", figure)], samples[("candidate", figure)]
        ratio = f"{_median(this, 0) / target:.2f}" if target else ""
        print(
            f"{label:<42} {_median(this, 0):6.1f} / {_median(this, 1):6.1f} "
            f"{_median(other, 0):6.1f} / {_median(other, 1):6.1f}  {target or '':>6}  {ratio}"
        )


def _ask(proc: subprocess.Popen[str], figure: str, runs: int) -> list[tuple[float, float]]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{figure} {runs}\n")
    proc.stdin.flush()
    return [tuple(sample) for sample in json.loads(proc.stdout.readline())]


def _median(samples: list[tuple[float, float]], index: int) -> float:
    return statistics.median(sample[index] for sample in samples)


if __name__ == "__main__":
    main()
