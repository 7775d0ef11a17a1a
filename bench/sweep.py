"""Sweep 1,000 subscriptions against the simulator with 50 ms injected latency; target ≤ 5 s.

    .venv/bin/python bench/sweep.py

Starts a simulator subprocess, registers nothing (the simulator auto-registers plan
tokens on first use), creates 1,000 subscriptions in a throwaway database and runs
one real ``headroom_sweep``: leader marker, one get_many, 1,000 single-flight claims,
1,000 HTTP reads at the default concurrency (16), one set_many, history rows. The
floor any sweep at that concurrency must pay is 1,000 / 16 × 50 ms ≈ 3.1 s.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from datetime import UTC, datetime

from _setup import backends, boot, line

N = 1_000
LATENCY_MS = 50
TARGET_S = 5.0


def main() -> None:
    workdir = boot()
    from django.conf import settings
    from django.core.cache import cache

    from simulator.process import SimulatorProcess
    from subscriptions.headroom.sampler import headroom_sweep
    from subscriptions.headroom.store import snapshot_key
    from subscriptions.models import HeadroomSample, Subscription
    from trinity.crypto import Secret

    concurrency = settings.TRINITY_HEADROOM_CONCURRENCY
    with SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning") as sim:
        settings.TRINITY_ANTHROPIC_BASE_URL = sim.base_url
        sim.control.set_latency(LATENCY_MS, scope="all")
        tokens = [Secret(f"sk-ant-oat01-bench-{secrets.token_urlsafe(24)}") for _ in range(N)]
        Subscription.objects.bulk_create(
            [
                Subscription(
                    name=f"plan-{i:04d}",
                    provider="anthropic",
                    plan_type="max-20x",
                    token=token,
                    token_fingerprint=token.fingerprint,
                )
                for i, token in enumerate(tokens)
            ],
            batch_size=500,
        )
        start = time.perf_counter()
        report = headroom_sweep(now=datetime.now(tz=UTC))
        elapsed = time.perf_counter() - start
        served = Counter(r["status"] for r in sim.control.requests())

    floor = N / concurrency * LATENCY_MS / 1000
    print(
        f"bench/sweep.py: {N:,} subscriptions, {LATENCY_MS} ms injected latency, "
        f"concurrency {concurrency}; {backends()}"
    )
    print(line(f"one sweep of {N:,} subscriptions", elapsed, TARGET_S, "s"))
    print(line(f"latency floor at concurrency {concurrency}", floor, None, "s"))
    print(
        f"  probed {report.probed:,} (due {report.due:,}, busy {report.busy}), "
        f"statuses {report.statuses}, simulator answers {dict(served)}, "
        f"history rows {HeadroomSample.objects.count():,}"
    )
    cache.delete_many(
        [snapshot_key(pk) for pk in Subscription.objects.values_list("pk", flat=True)]
    )


if __name__ == "__main__":
    main()
