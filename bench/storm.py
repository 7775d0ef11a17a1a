"""The turn storm: 500 concurrent turns across 50 agents while 3 of 4 plans refuse.

    BENCH_DATABASE_URL=postgres://root@127.0.0.1:5432/trinity \\
    BENCH_REDIS_URL=redis://127.0.0.1:6379/3 \\
    .venv/bin/python bench/storm.py [--turns 500] [--agents 50] [--cli-agents 5]

On Postgres (a throwaway database beside the one BENCH_DATABASE_URL names, dropped
afterwards) and Redis (an empty database, flushed afterwards), against the provider
simulator: 50 agents, each with its own agent server started by the platform (45 on
the ``anthropic-api`` runtime, 5 on the real Claude Code CLI), every one assigned to
one of three exhausted plans; a fourth plan serves. Two gunicorn processes
(deploy/gunicorn.conf.py, one worker of 32 threads each) and one Celery worker serve
every turn at once; every fifth turn is ``async: true``. bench/_storm.py is the
harness (tests/storm/ runs it small in ``make test``).

Figures, each beside its target: turns completed (100 %), each agent committed
exactly once to the serving plan (and told once), no lost or duplicated turn (what
was sent, the Execution rows, and the simulator's request log agree), no duplicate
notification, no 5xx; and the backend's added latency under that load (p50, p99):
gunicorn's own request time for a sync turn (from the thread picking it up to the
response written, its access log) less the agent server's own time for the attempt
that served it (its JSON log lines for the execution id, 1 ms resolution). The same
less-agent figure as the client was answered (adding the wait for a free web thread
in a 500-turn burst) is reported beside it.

Bounded: ``--turns`` and ``--max-seconds`` for the whole storm. Loopback only. It
stops every process it started and deletes every Redis key it made, then drops its
database. Exit status 1 when a correctness figure missed its target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._setup import (  # noqa: E402 - needs ROOT on the path
    boot,
    empty_redis,
    throwaway_postgres,
    turn_backends,
)
from bench._storm import StormPlan, storm_run  # noqa: E402


def main() -> int:
    defaults = StormPlan()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=defaults.turns)
    parser.add_argument("--agents", type=int, default=defaults.agents)
    parser.add_argument("--cli-agents", type=int, default=defaults.cli_agents)
    parser.add_argument("--async-every", type=int, default=defaults.async_every)
    parser.add_argument("--web-processes", type=int, default=defaults.web_processes)
    parser.add_argument("--web-threads", type=int, default=defaults.web_threads)
    parser.add_argument("--worker-concurrency", type=int, default=defaults.worker_concurrency)
    parser.add_argument("--max-seconds", type=float, default=defaults.max_seconds)
    args = parser.parse_args()
    plan = StormPlan(
        turns=args.turns,
        agents=args.agents,
        cli_agents=args.cli_agents,
        async_every=args.async_every,
        web_processes=args.web_processes,
        web_threads=args.web_threads,
        worker_concurrency=args.worker_concurrency,
        max_seconds=args.max_seconds,
    )
    database_url, redis_url = turn_backends()
    with throwaway_postgres(database_url) as bench_db, empty_redis(redis_url):
        workdir = boot(database_url=bench_db, redis_url=redis_url)
        result = storm_run(
            plan, database_url=bench_db, redis_url=redis_url, workdir=workdir / "storm"
        )
    print("bench/storm.py")
    for row in result.table():
        print(row)
    problems = result.problems()
    for problem in problems:
        print(f"  MISSED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
