"""What the backend adds to a served turn: ≤ 2 ms median and ≤ 5 ms p99.

    BENCH_DATABASE_URL=postgres://root@127.0.0.1:5432/trinity \\
    BENCH_REDIS_URL=redis://127.0.0.1:6379/3 \\
    .venv/bin/python bench/turn_overhead.py [--pairs 1000] [--profile 300] [--conn-max-age]

On Postgres (a throwaway database beside the one BENCH_DATABASE_URL names, dropped
afterwards) and Redis (an empty database, flushed afterwards): 500 subscriptions with
fresh headroom readings and 200 agents, all recorded as running on one real agent
server (``python -m agent_server``, the ``anthropic-api`` runtime) whose upstream is
the provider simulator, so the turn itself is a few milliseconds. The web is gunicorn
with deploy/gunicorn.conf.py (one worker process), authenticated by an API token.

Side by side in one run, interleaved (the order rotates every pair, so machine noise
hits both equally), for each agent in turn:

- direct: ``POST /api/task`` to the agent server, with the body the dispatch loop sends
  (the agent's plan token as ``auth_override``);
- web: ``POST /api/agents/{name}/task`` through gunicorn, which sends that same request.

Added = the web's quantile minus the direct quantile (median and p99). Bounded: at
most ``--pairs`` pairs after a warm-up, and ``--max-seconds``. Then one process serves
``threads`` concurrent turns at 1 s of injected upstream latency (the deployed
concurrency per process), and ``--profile N`` runs N turns through the same WSGI
application in this process under cProfile, with the served path's queries counted.
``--conn-max-age`` adds a web whose DATABASE_URL keeps its connections
(``?conn_max_age=600``) and ``--candidate PATH`` a web run from another checkout (a
proposed change), each measured in the same interleaving.

Every process it starts (simulator, agent server, gunicorn) is stopped on the way out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
from _setup import (
    TURN_MESSAGE,
    WEB_CONF,
    Fleet,
    WebProcess,
    backends,
    boot,
    cpu_and_wall_profiles,
    direct_body,
    empty_redis,
    line,
    log_as_deployed,
    machine,
    quantile,
    throwaway_postgres,
    turn_backends,
    turn_rig,
    wsgi_turn,
)

SUBSCRIPTIONS = 500
AGENTS = 200
TARGET_MEDIAN_MS = 2.0
TARGET_P99_MS = 5.0
WARMUP = 50
CONCURRENT_LATENCY_MS = 1000
PROFILE_TOP = 35

Send = Callable[[tuple[str, int, str]], httpx.Response]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=1000, help="measured pairs (after warm-up)")
    parser.add_argument("--max-seconds", type=float, default=150.0, help="measurement cap")
    parser.add_argument("--profile", type=int, default=300, help="in-process turns profiled")
    parser.add_argument(
        "--conn-max-age",
        action="store_true",
        help="also measure a web that keeps its database connections",
    )
    parser.add_argument(
        "--candidate",
        action="append",
        type=Path,
        default=[],
        help="also measure a web run from this checkout (a proposed change); repeatable",
    )
    args = parser.parse_args()
    database_url, redis_url = turn_backends()
    with throwaway_postgres(database_url) as bench_db, empty_redis(redis_url):
        workdir = boot(database_url=bench_db, redis_url=redis_url)
        run(args, workdir, bench_db)


def run(args: argparse.Namespace, workdir: Path, bench_db: str) -> None:
    with turn_rig(workdir, subscriptions=SUBSCRIPTIONS, agents=AGENTS) as rig:
        webs = {"web": rig.web("web")}
        if args.conn_max_age:
            webs["web, conn_max_age=600"] = rig.web(
                "web-persistent", DATABASE_URL=f"{bench_db}?conn_max_age=600"
            )
        webs |= rig.candidates(args.candidate)
        with ExitStack() as web_stack:
            for web in webs.values():
                web_stack.enter_context(web)
            samples, cpu = measure(
                rig.fleet,
                server_url=rig.server.base_url,
                secret=rig.secret,
                webs=webs,
                pairs=args.pairs,
                max_seconds=args.max_seconds,
            )
            # The web's bound on requests inside Django at once (trinity/asgi.py).
            from trinity.asgi import web_threads

            threads = web_threads(os.environ)
            rig.sim.control.set_latency(CONCURRENT_LATENCY_MS)
            concurrent = concurrent_turns(webs["web"], rig.fleet, threads)
            rig.sim.control.set_latency(0)
        report(samples, cpu, concurrent, threads)
        if args.profile:
            profile(
                rig.fleet, turns=args.profile, server_url=rig.server.base_url, secret=rig.secret
            )
        print(f"  (logs under {workdir})")


def measure(
    fleet: Fleet,
    *,
    server_url: str,
    secret: str,
    webs: dict[str, WebProcess],
    pairs: int,
    max_seconds: float,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Interleaved wall times in ms per target (the first WARMUP rounds dropped), and
    each web's worker CPU per measured turn in ms."""
    with ExitStack() as clients:
        targets = turn_senders(clients, fleet, server_url=server_url, secret=secret, webs=webs)
        samples, cpu_start = interleaved(targets, fleet, webs, pairs=pairs, max_seconds=max_seconds)
    measured = max(len(samples["direct"]), 1)
    cpu = {
        label: (web.cpu_seconds() - cpu_start.get(label, 0.0)) * 1000 / measured
        for label, web in webs.items()
    }
    return samples, cpu


def turn_senders(
    clients: ExitStack,
    fleet: Fleet,
    *,
    server_url: str,
    secret: str,
    webs: dict[str, WebProcess],
) -> list[tuple[str, Send]]:
    """A served turn sent to the agent server directly, then through each web; their
    HTTP clients closed with ``clients``."""
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    direct = clients.enter_context(
        httpx.Client(
            base_url=server_url,
            headers={"Authorization": f"Bearer {secret}"},
            timeout=30.0,
            trust_env=False,
            limits=limits,
        )
    )

    def send_direct(agent: tuple[str, int, str]) -> httpx.Response:
        response = direct.post("/api/task", json=direct_body(token=agent[2]))
        if response.status_code != 200:
            raise SystemExit(f"direct turn answered {response.status_code}: {response.text[:300]}")
        return response

    targets: list[tuple[str, Send]] = [("direct", send_direct)]
    for label, web in webs.items():
        client = clients.enter_context(
            httpx.Client(
                base_url=web.base_url,
                headers={"Authorization": f"Token {fleet.api_token}"},
                timeout=30.0,
                trust_env=False,
                limits=limits,
            )
        )
        targets.append((label, web_sender(client)))
    return targets


def web_sender(client: httpx.Client) -> Send:
    """A turn through ``client``'s web, which must be served on a subscription."""

    def send(agent: tuple[str, int, str]) -> httpx.Response:
        response = client.post(f"/api/agents/{agent[0]}/task", json={"message": TURN_MESSAGE})
        body = response.json()
        if response.status_code != 200 or body.get("served_by_kind") != "subscription":
            raise SystemExit(f"web turn answered {response.status_code}: {response.text[:300]}")
        return response

    return send


def interleaved(
    targets: list[tuple[str, Send]],
    fleet: Fleet,
    webs: dict[str, WebProcess],
    *,
    pairs: int,
    max_seconds: float,
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Wall ms per target over WARMUP + ``pairs`` rounds (the warm-up dropped), the
    order rotating each round, within ``max_seconds``; and each web's worker CPU seconds
    when the warm-up ended."""
    samples: dict[str, list[float]] = {label: [] for label, _ in targets}
    cpu_start: dict[str, float] = {}
    deadline = time.monotonic() + max_seconds
    for i in range(WARMUP + pairs):
        if i == WARMUP:
            cpu_start = {label: web.cpu_seconds() for label, web in webs.items()}
        if time.monotonic() > deadline:
            print(f"  stopped at the {max_seconds:g} s cap after {i - WARMUP} pairs")
            break
        agent = fleet.agents[i % len(fleet.agents)]
        shift = i % len(targets)
        for label, send in targets[shift:] + targets[:shift]:
            start = time.perf_counter()
            send(agent)
            elapsed = (time.perf_counter() - start) * 1000
            if i >= WARMUP:
                samples[label].append(elapsed)
    return samples, cpu_start


def concurrent_turns(web: WebProcess, fleet: Fleet, count: int) -> tuple[int, float]:
    """``count`` turns at once against the one web process; returns (served, wall s)."""
    headers = {"Authorization": f"Token {fleet.api_token}"}
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    with (
        httpx.Client(
            base_url=web.base_url, headers=headers, timeout=60.0, trust_env=False, limits=limits
        ) as client,
        ThreadPoolExecutor(max_workers=count) as pool,
    ):

        def send(index: int) -> int:
            name = fleet.agents[index % len(fleet.agents)][0]
            response = client.post(f"/api/agents/{name}/task", json={"message": TURN_MESSAGE})
            return response.status_code

        start = time.perf_counter()
        statuses = list(pool.map(send, range(count)))
        wall = time.perf_counter() - start
    return sum(1 for s in statuses if s == 200), wall


def report(
    samples: dict[str, list[float]],
    cpu: dict[str, float],
    concurrent: tuple[int, float],
    threads: int,
) -> None:
    from django.conf import settings

    n = len(samples["direct"])
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"bench/turn_overhead.py: {SUBSCRIPTIONS} subscriptions, {AGENTS} agents; {backends()}; "
        f"gunicorn {WEB_CONF.name} (1 worker); {n} interleaved pairs; {machine()}"
    )
    direct = samples["direct"]
    d50, d99 = statistics.median(direct), quantile(direct, 0.99)
    print(f"  direct to the agent server: median {d50:.2f} ms, p99 {d99:.2f} ms")
    for label, values in samples.items():
        if label == "direct":
            continue
        w50, w99 = statistics.median(values), quantile(values, 0.99)
        paired = [w - d for w, d in zip(values, direct, strict=True)]
        print(f"  {label}: median {w50:.2f} ms, p99 {w99:.2f} ms ({db})")
        print(line(f"  {label}: added, median", w50 - d50, TARGET_MEDIAN_MS, "ms"))
        print(line(f"  {label}: added, p99", w99 - d99, TARGET_P99_MS, "ms"))
        paired_median = statistics.median(paired)
        print(line(f"  {label}: pairwise difference, median", paired_median, None, "ms"))
        print(line(f"  {label}: worker CPU per turn", cpu[label], None, "ms"))
    served, wall = concurrent
    print(
        f"  one web process, {threads} turns at once at {CONCURRENT_LATENCY_MS} ms upstream "
        f"latency: {served}/{threads} served in {wall:.2f} s "
        f"(one at a time: {threads * CONCURRENT_LATENCY_MS / 1000:.0f} s)"
    )


def profile(fleet: Fleet, *, turns: int, server_url: str, secret: str) -> None:
    """Served turns through the WSGI application in this process, under cProfile.

    Logging as deployed (INFO). Queries of one turn are counted with
    CaptureQueriesContext; the in-process added time is measured interleaved with
    direct calls, as above (no gunicorn, no HTTP parsing on the web side).
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    log_as_deployed()

    def call(agent: tuple[str, int, str]) -> None:
        status, payload = wsgi_turn(agent[0], fleet.api_token)
        if status != 200:
            raise SystemExit(f"in-process turn answered {status}: {payload}")

    agents = fleet.agents
    for agent in agents[:20]:
        call(agent)  # warm up: imports, the URL resolver, the first connection
    with CaptureQueriesContext(connection) as queries:
        call(agents[0])
    print(f"  in-process served turn: {len(queries)} SQL statements")
    for query in queries.captured_queries:
        print(f"    {query['time']}s  {query['sql'][:110]}")

    direct = httpx.Client(
        base_url=server_url, headers={"Authorization": f"Bearer {secret}"}, trust_env=False
    )
    walls: dict[str, list[float]] = {"direct": [], "in-process": []}
    for i in range(turns):
        agent = agents[i % len(agents)]
        token = agent[2]
        steps: list[tuple[str, Callable[[], object]]] = [
            ("direct", lambda token=token: direct.post("/api/task", json=direct_body(token=token))),
            ("in-process", lambda agent=agent: call(agent)),
        ]
        for label, step in steps if i % 2 == 0 else steps[::-1]:
            start = time.perf_counter()
            step()
            walls[label].append((time.perf_counter() - start) * 1000)
    direct.close()
    added = statistics.median(walls["in-process"]) - statistics.median(walls["direct"])
    label = f"  in-process (WSGI, no gunicorn): added, median, {turns} pairs"
    print(line(label, added, None, "ms"))
    cpu_start = time.thread_time()
    for i in range(turns):
        call(agents[i % len(agents)])
    cpu = (time.thread_time() - cpu_start) * 1000 / turns
    print(line("  in-process: this thread's CPU per turn (unprofiled)", cpu, None, "ms"))

    def served() -> None:
        for i in range(turns):
            call(agents[i % len(agents)])

    print(cpu_and_wall_profiles(served, title=f"{turns} in-process served turns", top=PROFILE_TOP))


if __name__ == "__main__":
    main()
