"""Live turns' event streams against the API: one web process, 100 open streams.

One gunicorn (deploy/gunicorn.conf.py, WEB_CONCURRENCY=1, as deployed: uvicorn workers on
trinity.asgi) on a loopback port, on a throwaway Postgres database and an empty Redis
database (bench/_setup.py, as the turn benchmarks). It creates a user with an API token,
an agent, finished executions and running ones (with their events when
execution.models.ExecutionEvent exists), then measures ``GET /api/agents`` (sequential,
one kept-alive client) idle and while ``--streams`` clients hold
``GET /api/executions/{id}/events`` open on running executions, in interleaved rounds
(idle, loaded, loaded, idle, ...) so drift hits both. Target: p99 loaded <= 2 x p99 idle.

Also reported: every stream still open at the end of each loaded block, the worker's
threads and the bench database's Postgres connections while they are open, and (when
events exist) a finished execution's stream replayed to its end.

Bounded: ``--streams``, ``--requests``, ``--rounds``; ``--max-seconds`` for the whole run.
Every process it starts stops on the way out; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._setup import (  # noqa: E402
    WebProcess,
    boot,
    empty_redis,
    line,
    machine,
    quantile,
    throwaway_postgres,
    turn_backends,
    web_environ,
)

TARGET_RATIO = 2.0


@dataclass
class Rig:
    token: str
    running: list[str]
    finished: list[str]
    events: bool


def _rig(*, running: int, finished: int) -> Rig:
    """An owner with a token, one agent, ``finished`` succeeded executions and
    ``running`` ones (their streams stay open), with events when the model exists."""
    from django.apps import apps
    from django.contrib.auth.models import User
    from django.utils import timezone
    from knox.models import AuthToken

    from agents.models import Agent, Runtime
    from execution.models import Execution, Status
    from trinity.crypto import Secret

    owner = User.objects.create(username="sse-owner")
    token = AuthToken.objects.create(user=owner)[1]
    agent = Agent.objects.create(
        name="sse-agent", owner=owner, runtime=Runtime.ANTHROPIC_API, shared_secret=Secret("x" * 32)
    )
    now = timezone.now()
    rows = [
        Execution(
            agent=agent,
            agent_name=agent.name,
            message=f"turn {i}",
            status=Status.RUNNING if i < running else Status.SUCCEEDED,
            response="" if i < running else "done",
            created_at=now,
            finished_at=None if i < running else now,
        )
        for i in range(running + finished)
    ]
    Execution.objects.bulk_create(rows)
    events = _events_create(apps, rows, running=running)
    ids = [str(r.pk) for r in rows]
    return Rig(token=token, running=ids[:running], finished=ids[running:], events=events)


def _events_create(apps: object, rows: list[object], *, running: int) -> bool:
    """The lead's ExecutionEvent rows (turn ... end) when that model exists."""
    try:
        model = apps.get_model("execution", "ExecutionEvent")  # type: ignore[attr-defined]
    except LookupError:
        return False
    from django.utils import timezone

    now, made = timezone.now(), []
    for i, row in enumerate(rows):
        kinds = ["turn", "sent", "text", "served"] + ([] if i < running else ["end"])
        for seq, kind in enumerate(kinds, start=1):
            data = {"attempt": 0 if kind == "turn" else 1, "at": now.isoformat()}
            if kind == "text":
                data["text"] = "hello " * 20
            if kind == "end":
                data.update({"status": "succeeded", "response": "done"})
            made.append(model(execution=row, seq=seq, kind=kind, data=data, at=now))
    model.objects.bulk_create(made)
    return True


@dataclass
class Streams:
    """``count`` SSE clients on a loop in a thread of their own, held open until ``close``."""

    base_url: str
    token: str
    ids: list[str]
    count: int
    opened: int = 0
    failed: list[str] = field(default_factory=list)
    _stop: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def open(self, timeout: float) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while self.opened + len(self.failed) < self.count and time.monotonic() < deadline:
            time.sleep(0.05)  # waiting for the clients' first event
        if self.opened < self.count:
            raise RuntimeError(f"{self.opened}/{self.count} streams opened; {self.failed[:3]}")

    def still_open(self) -> int:
        return sum(not t.done() for t in self._tasks)

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self, ready: threading.Event) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        limits = httpx.Limits(max_connections=self.count + 1, max_keepalive_connections=0)
        timeout = httpx.Timeout(30.0, read=60.0)
        async with httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as client:
            self._tasks = [
                asyncio.ensure_future(self._one(client, self.ids[i % len(self.ids)]))
                for i in range(self.count)
            ]
            await self._stop.wait()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _one(self, client: httpx.AsyncClient, execution_id: str) -> None:
        url = f"{self.base_url}/api/executions/{execution_id}/events"
        headers = {"Authorization": f"Token {self.token}", "Accept": "text/event-stream"}
        try:
            async with client.stream("GET", url, headers=headers) as response:
                kind = response.headers.get("content-type", "")
                if response.status_code != 200 or not kind.startswith("text/event-stream"):
                    self.failed.append(f"{response.status_code} {kind}")
                    return
                counted = False
                async for chunk in response.aiter_bytes():
                    if not counted and b"event: turn" in chunk:
                        counted = True
                        self.opened += 1
        except httpx.HTTPError as exc:
            self.failed.append(repr(exc))


def _api_times(client: httpx.Client, n: int) -> list[float]:
    """``n`` sequential GET /api/agents on one kept-alive connection, ms each."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get("/api/agents")
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"GET /api/agents answered {response.status_code}")
    return times


def _threads(pid: int) -> int:
    """Threads of gunicorn's worker (the master's child)."""
    for entry in Path("/proc").iterdir():
        with suppress(OSError, IndexError):
            if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[
                1
            ] == str(pid):
                status = (entry / "status").read_text()
                return int(status.split("Threads:")[1].split()[0])
    return -1


def _pg_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def _replay(base_url: str, rig: Rig) -> str:
    """A finished execution's stream read to its end (it must close by itself)."""
    if not rig.events:
        return "skipped (no ExecutionEvent model yet)"
    headers = {"Authorization": f"Token {rig.token}", "Accept": "text/event-stream"}
    started = time.perf_counter()
    url = f"{base_url}/api/executions/{rig.finished[0]}/events"
    with httpx.stream("GET", url, headers=headers, timeout=30.0, trust_env=False) as response:
        body = b"".join(response.iter_bytes())
    ms = (time.perf_counter() - started) * 1000
    return (
        f"{response.status_code}, {body.count(b'event: ')} events, closed by itself in {ms:.1f} ms"
    )


def _measure(args: argparse.Namespace, web: WebProcess, rig: Rig, proc_pid: int) -> None:
    per_block = max(1, args.requests // args.rounds)
    idle: list[float] = []
    loaded: list[float] = []
    notes: list[str] = []
    deadline = time.monotonic() + args.max_seconds
    with httpx.Client(base_url=web.base_url, trust_env=False, timeout=30.0,
                      headers={"Authorization": f"Token {rig.token}"}) as client:  # fmt: skip
        _api_times(client, 30)  # warm-up, not counted
        for r in range(args.rounds):
            order = ("idle", "loaded") if r % 2 == 0 else ("loaded", "idle")
            for phase in order:
                if time.monotonic() > deadline:
                    raise SystemExit(f"--max-seconds {args.max_seconds} reached")
                if phase == "idle":
                    idle += _api_times(client, per_block)
                    continue
                streams = Streams(web.base_url, rig.token, rig.running, args.streams)
                try:
                    streams.open(timeout=60)
                    threads, conns = _threads(proc_pid), _pg_connections()
                    loaded += _api_times(client, per_block)
                    notes.append(
                        f"round {r}: {streams.still_open()}/{args.streams} streams open after "
                        f"the block; worker threads {threads}; bench-db connections {conns}"
                    )
                finally:
                    streams.close()
    _report(args, idle, loaded, notes, _replay(web.base_url, rig))


def _report(args: argparse.Namespace, idle: list[float], loaded: list[float],
            notes: list[str], replay: str) -> None:  # fmt: skip
    print(f"GET /api/agents, {len(idle)} idle / {len(loaded)} with {args.streams} open streams")
    for label, values in (("idle", idle), ("loaded", loaded)):
        p50, p99 = quantile(values, 0.5), quantile(values, 0.99)
        print(f"  {label:<7} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   max {max(values):7.2f} ms")
    ratio = quantile(loaded, 0.99) / quantile(idle, 0.99)
    print(line("p99 loaded / p99 idle", ratio, TARGET_RATIO, "x"))
    print(line("p50 loaded / p50 idle", quantile(loaded, 0.5) / quantile(idle, 0.5), None, "x"))
    for note in notes:
        print(f"  {note}")
    print(f"  replay of a finished turn: {replay}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--requests", type=int, default=300, help="per phase, over all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--running", type=int, default=10, help="running executions")
    parser.add_argument("--finished", type=int, default=10, help="finished executions")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    if not (1 <= args.streams <= 1000 and 1 <= args.requests <= 10000 and args.rounds >= 1):
        raise SystemExit("--streams 1..1000, --requests 1..10000, --rounds >= 1")
    database_url, redis_url = turn_backends()
    with throwaway_postgres(database_url) as bench_db, empty_redis(redis_url):
        workdir = boot(database_url=bench_db, redis_url=redis_url)
        rig = _rig(running=args.running, finished=args.finished)
        environ = web_environ(WEB_CONCURRENCY="1")
        print(f"one web: gunicorn -c deploy/gunicorn.conf.py, 1 worker; {machine()}")
        print(f"logs in {workdir}")
        with WebProcess(environ=environ, log_path=workdir / "web.log", workers=1) as web:
            assert web._proc is not None
            _measure(args, web, rig, web._proc.pid)
        from django.db import connections

        connections.close_all()
    print(f"done ({os.getloadavg()[0]:.1f} load)")


if __name__ == "__main__":
    main()
