"""Two real processes racing to refresh one plan's tokens (the lock-and-rotate core's
test, for each provider's scheme)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import connections

from simulator.control import SimulatorControl
from subscriptions.plan_refresh import Fresh

Outcome = tuple[str, str, str]


def _one(
    fresh: Callable[..., Fresh[Any]],
    pk: int,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.Queue[Outcome],
) -> None:
    """One process wanting the plan's tokens now; its own database connection."""
    try:
        barrier.wait(timeout=30)
        got = fresh(pk, now=datetime.now(UTC))
        results.put((got.refresh.value, got.code, got.credential.access_token))
    finally:
        connections.close_all()


def race_refresh(sim: SimulatorControl, fresh: Callable[..., Fresh[Any]], pk: int) -> list[Outcome]:
    """``fresh(pk, now=…)`` in two forked processes at once; each one's ``(refresh,
    code, access token)``. The refresh takes a while (300 ms of injected latency), so
    the second process reaches the lock while the first holds it: without the lock
    and the re-read inside it, both would refresh and the second would present a
    spent refresh token."""
    sim.set_latency(300)
    connections.close_all()  # each child opens its own connection
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    results: multiprocessing.Queue[Outcome] = context.Queue()
    workers = [context.Process(target=_one, args=(fresh, pk, barrier, results)) for _ in "ab"]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    sim.set_latency(0)
    return outcomes
