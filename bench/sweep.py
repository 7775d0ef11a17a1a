"""Sweep 1,000 subscriptions against the simulator with 50 ms injected latency; target ≤ 5 s.

    .venv/bin/python bench/sweep.py

Starts a simulator subprocess, registers nothing (the simulator auto-registers plan
tokens on first use), creates 1,000 subscriptions in a throwaway database and runs
one real ``headroom_sweep``: leader marker, one get_many, 1,000 single-flight claims,
1,000 HTTP reads at the default concurrency (16), one set_many, history rows. The
floor any sweep at that concurrency must pay is 1,000 / 16 × 50 ms ≈ 3.1 s.

Then a second row, providers that hang: 1,000 fresh subscriptions of which 200 (every
fifth) hang on the usage endpoint past a 2 s probe timeout. Every answering one must
be stored within that one sweep (its bound, ``sweep_bounds``), no plan may be probed
twice, and each reading carries its own instant. The floor at concurrency 16 is
200 × 2 s / 16 + 800 / 16 × 50 ms ≈ 27.5 s.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _setup import backends, boot, line

N = 1_000
LATENCY_MS = 50
TARGET_S = 5.0
HANGING_EVERY = 5  # 200 of 1,000
HANG_TIMEOUT_S = 2
HANG_MS = (HANG_TIMEOUT_S + 3) * 1000


def main() -> None:
    workdir = boot()
    from django.conf import settings

    from simulator.process import SimulatorProcess
    from subscriptions.headroom.sampler import headroom_sweep
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
        report = headroom_sweep(clock=lambda: datetime.now(tz=UTC))
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
    snapshots_delete()
    hanging_providers(workdir)


def hanging_providers(workdir: Path) -> None:
    """One sweep of 1,000 fresh subscriptions, 200 of them hanging past the timeout."""
    from django.conf import settings

    from simulator.process import SimulatorProcess
    from subscriptions.headroom.sampler import configured_bounds, headroom_sweep
    from subscriptions.models import Subscription

    # 200 "timeout" warnings, one per hung plan, are the expected outcome, not news.
    logging.getLogger("subscriptions.headroom.collectors").setLevel(logging.ERROR)
    Subscription.objects.all().delete()
    settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS = HANG_TIMEOUT_S
    bounds = configured_bounds()
    with SimulatorProcess(log_path=workdir / "simulator-hang.log", log_level="warning") as sim:
        settings.TRINITY_ANTHROPIC_BASE_URL = sim.base_url
        sim.control.set_latency(LATENCY_MS, scope="all")
        hanging = hanging_fleet_create(sim.control)
        started_at = datetime.now(tz=UTC)
        start = time.perf_counter()
        report = headroom_sweep(clock=lambda: datetime.now(tz=UTC))
        elapsed = time.perf_counter() - start
        # The hung handlers log their request when they finally answer.
        time.sleep(HANG_MS / 1000)
        per_plan = Counter(str(r["credential"]) for r in sim.control.requests())
    history = sweep_history(hanging, started_at=started_at)
    concurrency = settings.TRINITY_HEADROOM_CONCURRENCY
    floor = (
        len(hanging) * HANG_TIMEOUT_S / concurrency
        + (N - len(hanging)) / concurrency * LATENCY_MS / 1000
    )
    print(
        f"bench/sweep.py: {N:,} subscriptions, {len(hanging)} hanging past a "
        f"{HANG_TIMEOUT_S} s probe timeout, {LATENCY_MS} ms latency, concurrency {concurrency}"
    )
    print(line("one sweep with 200 hanging providers", elapsed, float(bounds.sweep), "s"))
    print(line("latency floor with the hanging ones", floor, None, "s"))
    print(line("last answering reading taken after", history.last_answer_s, None, "s"))
    print(
        f"  answering stored {history.stored:,} of {N - len(hanging):,}; hung timed out "
        f"{history.timed_out} of {len(hanging)}; most probes of one plan: simulator "
        f"{max(per_plan.values())}, history {history.most_rows}; distinct reading instants "
        f"{history.stamps:,}; report probed {report.probed:,} late {report.late} "
        f"busy {report.busy}"
    )
    snapshots_delete()


def hanging_fleet_create(control: Any) -> set[str]:
    """N subscriptions (``hang-<i>``), registered with the simulator under their names;
    every HANGING_EVERY-th one's usage endpoint answers after HANG_MS. Returns the
    hanging ones' names."""
    from subscriptions.models import Subscription
    from trinity.crypto import Secret

    names = [f"hang-{i:04d}" for i in range(N)]
    hanging = {name for i, name in enumerate(names) if i % HANGING_EVERY == 0}
    tokens = [Secret(f"sk-ant-oat01-bench-{secrets.token_urlsafe(24)}") for _ in names]
    for name, token in zip(names, tokens, strict=True):
        # labelled, so the simulator's log counts requests per plan exactly
        control.register(
            token.reveal(),
            kind="oauth",
            label=name,
            usage_delay_ms=HANG_MS if name in hanging else None,
        )
    Subscription.objects.bulk_create(
        [
            Subscription(
                name=name,
                provider="anthropic",
                plan_type="max-20x",
                token=token,
                token_fingerprint=token.fingerprint,
            )
            for name, token in zip(names, tokens, strict=True)
        ],
        batch_size=500,
    )
    return hanging


@dataclass(frozen=True)
class SweepHistory:
    """What the history rows say of the sweep with hanging providers."""

    stored: int  # answering plans' ok readings
    timed_out: int  # hanging plans' readings recorded as timed out
    last_answer_s: float  # the last answering reading's instant, after the sweep began
    most_rows: int  # most readings of one plan
    stamps: int  # distinct reading instants


def sweep_history(hanging: set[str], *, started_at: datetime) -> SweepHistory:
    from django.db.models import Count, Max

    from subscriptions.models import HeadroomSample

    rows = HeadroomSample.objects.select_related("subscription")
    answering = rows.exclude(subscription__name__in=hanging)
    last_answer = answering.aggregate(last=Max("fetched_at"))["last"]
    return SweepHistory(
        stored=answering.filter(status="ok").count(),
        timed_out=rows.filter(subscription__name__in=hanging, detail="timeout").count(),
        last_answer_s=((last_answer - started_at).total_seconds() if last_answer else float("nan")),
        most_rows=(
            HeadroomSample.objects.values("subscription_id")
            .annotate(n=Count("id"))
            .aggregate(most=Max("n"))["most"]
        ),
        stamps=HeadroomSample.objects.values("fetched_at").distinct().count(),
    )


def snapshots_delete() -> None:
    """The store's snapshot of every subscription, deleted."""
    from django.core.cache import cache

    from subscriptions.headroom.store import snapshot_key
    from subscriptions.models import Subscription

    cache.delete_many(
        [snapshot_key(pk) for pk in Subscription.objects.values_list("pk", flat=True)]
    )


if __name__ == "__main__":
    main()
