"""One side of ``bench/ranking.py --candidate``: the 10,000 fleet in one checkout.

    <checkout>/.venv/bin/python bench/_ranking_worker.py --root <checkout>

Runs the product code and ``bench/_setup.py`` of the checkout ``--root`` names, with
the fleet and readings this tree's ``bench/ranking.py`` builds: the driver starts one
worker per checkout and interleaves what it asks of them. On a throwaway Postgres
database beside BENCH_DATABASE_URL (dropped after) and BENCH_REDIS_URL; it deletes
the snapshot keys it wrote. Prints ``ready``, then for each line ``<figure> <runs>``
on stdin one JSON line: ``[[wall ms, CPU ms], ...]``, each run after a full
collection, as ``bench/ranking.py`` times them.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

FIGURES = ("e2e_balanced", "e2e_banded", "sql", "store", "rank_balanced", "rank_banded")


def _timed(fn: Callable[[], object], runs: int) -> list[tuple[float, float]]:
    out = []
    for _ in range(runs):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        out.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    root = parser.parse_args().root.resolve()
    # The checkout's own modules first: its product code, its bench helpers.
    sys.path[:0] = [str(root / "bench"), str(root)]
    from _setup import boot, throwaway_postgres

    # The fleet and its readings as this tree's bench/ranking.py builds them, whatever
    # the checkout measured (its own bench helpers above).
    spec = importlib.util.spec_from_file_location("ranking", Path(__file__).with_name("ranking.py"))
    assert spec is not None and spec.loader is not None
    ranking = importlib.util.module_from_spec(spec)
    # Registered before it runs, as importlib's recipe has it: a dataclass looks its
    # module up there.
    sys.modules[spec.name] = ranking
    spec.loader.exec_module(ranking)

    with throwaway_postgres(os.environ["BENCH_DATABASE_URL"]) as url:
        boot(database_url=url)
        # Both sides share one Redis database: keys of their own, so neither reads the
        # other's snapshots (two checkouts may store them in different forms).
        from django.core.cache import caches

        caches["default"].key_prefix = f"trinity-bench-{os.getpid()}"
        figures, ids = _figures(ranking)
        _serve(figures, ids)


def _figures(ranking: Any) -> tuple[dict[str, Callable[[], object]], list[int]]:
    from django.contrib.auth.models import User

    from agents.models import Agent
    from subscriptions.headroom.store import snapshots_read, snapshots_write
    from trinity.crypto import Secret

    size, now = ranking.N, ranking.NOW
    rng = random.Random(7)
    ids = list(range(1, size + 1))
    counts = {pk: rng.randint(0, 5) for pk in ids}
    order = sorted(ids, key=lambda pk: (counts[pk], f"plan-{pk:05d}"))
    readings = ranking.fleet_readings(order)
    token = Secret("sk-ant-oat01-bench-" + "x" * 40)
    owner = User.objects.create(username="bench")
    ranking.fleet_create(
        ids, owner=owner, token=token, failed_at=now - timedelta(minutes=30), rng=rng
    )
    snapshots_write({pk: readings[pk] for pk in ids if pk in readings})
    agent = Agent.objects.create(
        name="bench-agent", owner=owner, model="claude-sonnet-4-5", shared_secret=token
    )
    sql, rank = _checkout_api(agent, now)
    candidates = sql()
    cached = snapshots_read([c.subscription_id for c in candidates]).readings
    from subscriptions.headroom.selection import rank_alternatives

    figures: dict[str, Callable[[], object]] = {
        "e2e_balanced": lambda: rank_alternatives(agent=agent, now=now, strategy="balanced"),
        "e2e_banded": lambda: rank_alternatives(agent=agent, now=now, strategy="banded"),
        "sql": sql,
        "store": lambda: snapshots_read([c.subscription_id for c in candidates]),
        "rank_balanced": lambda: rank(candidates, cached, "balanced"),
        "rank_banded": lambda: rank(candidates, cached, "banded"),
    }
    return figures, ids


def _checkout_api(agent: Any, now: Any) -> tuple[Callable[[], Any], Callable[..., Any]]:
    """The checkout's query of the provider's plans and its ranking call, whichever
    layout it has: the routing core's (``admit`` judging every plan) or the one before
    it (a filtered query, the ranking given ``now`` and the freshness limit)."""
    try:
        from routing.eligibility import Admission
        from routing.headroom.ranking import rank_candidates
        from subscriptions.plan_facts import candidates_read, fresh_for
    except ImportError:
        from subscriptions.headroom.ranking import rank_candidates  # type: ignore[no-redef]

        from subscriptions.headroom.selection import (  # type: ignore[attr-defined]
            candidates_filtered,
            fresh_for,  # type: ignore[no-redef]
        )

        def sql_before() -> Any:
            return candidates_filtered(provider="anthropic", exclude_ids=(agent.pk,), now=now)

        def rank_before(candidates: Any, cached: Any, strategy: str) -> Any:
            return rank_candidates(
                candidates,
                cached,
                now=now,
                max_age=fresh_for(),
                family="seven_day_sonnet",
                strategy=strategy,
            )

        return sql_before, rank_before
    admission = Admission(
        now=now, provider="anthropic", max_age=fresh_for(), family="seven_day_sonnet"
    )

    def sql() -> Any:  # as the selection asks it (the plan terms only for a policy that reads them)
        return candidates_read(provider="anthropic", now=now, terms=admission.hard_stop_only)

    def rank(candidates: Any, cached: Any, strategy: str) -> Any:
        return rank_candidates(candidates, cached, admission, strategy=strategy)

    return sql, rank


def _serve(figures: dict[str, Callable[[], object]], ids: list[int]) -> None:
    from django.core.cache import cache

    from subscriptions.headroom.store import snapshot_key

    for name in FIGURES:  # warm: every value decoded, every query planned
        figures[name]()
        figures[name]()
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            name, runs = line.split()
            print(json.dumps(_timed(figures[name], int(runs))), flush=True)
    finally:
        cache.delete_many([snapshot_key(pk) for pk in ids])


if __name__ == "__main__":
    main()
