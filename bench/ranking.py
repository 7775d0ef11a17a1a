"""Rank 10,000 subscriptions in one call; target ≤ 25 ms.

    .venv/bin/python bench/ranking.py

Measures, side by side: the ranking itself (the rules over 10,000 candidates and their
decoded readings: the targeted figure), then for context the store read of 10,000
snapshots (one get_many) and ``rank_alternatives`` end to end (one SQL query + one
get_many + decode + rank). Median and p95 over repeated runs.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from _setup import backends, boot, line

N = 10_000
TARGET_MS = 25.0
RUNS = 30
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
    from subscriptions.headroom.reading import Reading, ReadingStatus, WindowReading

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


def main() -> None:
    boot()
    from django.contrib.auth.models import User
    from django.core.cache import cache

    from agents.models import Agent
    from subscriptions.headroom.rules import Candidate, rank_candidates
    from subscriptions.headroom.selection import fresh_for, rank_alternatives
    from subscriptions.headroom.store import snapshot_key, snapshots_read, snapshots_write
    from subscriptions.models import RateLimitEvent, Subscription
    from trinity.crypto import Secret

    rng = random.Random(7)
    ids = list(range(1, N + 1))
    failed_at = NOW - timedelta(minutes=30)
    # In load-balance order and allocated in that order, as candidates_filtered
    # builds them from the ordered query.
    counts = {pk: rng.randint(0, 5) for pk in ids}
    order = sorted(ids, key=lambda pk: (counts[pk], f"plan-{pk:05d}"))
    candidates = [
        Candidate(pk, f"plan-{pk:05d}", counts[pk], failed_at if pk % 10 == 0 else None)
        for pk in order
    ]
    # Built in candidate order, as the store decodes them for rank_alternatives (one
    # get_many over the candidates' keys): memory order matters at this size.
    readings = fleet_readings([c.subscription_id for c in candidates])
    max_age = fresh_for()

    def rank() -> object:
        return rank_candidates(
            candidates, readings, now=NOW, max_age=max_age, family="seven_day_sonnet"
        )

    rank_median, rank_p95, rank_cpu = timed(rank)

    # The same fleet in the database and the store, for the end-to-end figures.
    token = Secret("sk-ant-oat01-bench-" + "x" * 40)
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
    owner = User.objects.create(username="bench")
    Agent.objects.bulk_create(
        [
            Agent(
                name=f"agent-{i}", owner=owner, subscription_id=rng.choice(ids), shared_secret=token
            )
            for i in range(N // 2)
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
    snapshots_write(readings)  # type: ignore[arg-type]
    read_median, _, read_cpu = timed(lambda: snapshots_read(ids), runs=10)
    agent = Agent.objects.create(
        name="bench-agent", owner=owner, model="claude-sonnet-4-5", shared_secret=token
    )
    e2e_median, e2e_p95, e2e_cpu = timed(lambda: rank_alternatives(agent=agent, now=NOW), runs=10)
    selection = rank_alternatives(agent=agent, now=NOW)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"bench/ranking.py: {N:,} subscriptions; {backends()}; {os.cpu_count()} CPUs, load {load}"
    )
    print(line("rank_candidates, one call: wall (median)", rank_median, TARGET_MS, "ms"))
    print(line("rank_candidates, one call: wall (p95)", rank_p95, TARGET_MS, "ms"))
    print(line("rank_candidates, one call: CPU (median)", rank_cpu, TARGET_MS, "ms"))
    print(line("store read of 10,000 snapshots, one get_many: wall", read_median, None, "ms"))
    print(line("  ... CPU", read_cpu, None, "ms"))
    print(
        line("rank_alternatives end to end (SQL + get_many + rank): wall", e2e_median, None, "ms")
    )
    print(line("  ... CPU", e2e_cpu, None, "ms"))
    reason = selection.reason()
    print(
        f"  ranked {reason['candidate_count']:,}, last resort {reason['last_resort_count']:,}, "
        f"dropped {reason['dropped_count']:,}; first: tier={reason['tier']} "
        f"7d={reason['seven_day']} age={reason['reading_age_seconds']}s"
    )
    cache.delete_many([snapshot_key(pk) for pk in ids])


if __name__ == "__main__":
    main()
