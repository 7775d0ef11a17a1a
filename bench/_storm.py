"""The turn storm: many concurrent turns across many agents while most plans refuse.

One harness for ``bench/storm.py`` (500 turns, 50 agents) and ``tests/storm/`` (the
same path at a small size in ``make test``). Django must already be set up in this
process on the database ``database_url`` names (the bench's throwaway one, the test's
own); the processes started here share it and the Redis ``redis_url`` names:

- the provider simulator, with four plans: three exhausted (their 5-hour window
  full), one serving (capacity to spare);
- one agent server per agent, started by the platform's own ``agent_start`` (local
  processes): most on the ``anthropic-api`` runtime, a few on the real Claude Code
  CLI; every agent assigned to one of the three refusing plans;
- at least two gunicorn web processes with ``deploy/gunicorn.conf.py`` (one worker
  each, as two hosts would run them) and one ``celery -A trinity worker``.

Every turn is posted at once, alternating between the web processes; every fifth is
``async: true`` (half of those with an autonomous trigger), run by the worker. Each
message carries the turn's number, so a turn is traced through what was sent, its
Execution row, and the simulator's request log (one Messages request per attempt on
both runtimes: non-streaming from the direct runtime, streaming from the CLI).

Bounded: a turn count, a wall-clock cap for the whole storm, and bounded waits for
every process. Loopback only. Whatever happens, every process started here is stopped
and every Redis key it made is deleted (the caller drops or flushes the database).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench._setup import free_port, machine, quantile

ROOT = Path(__file__).resolve().parent.parent

MODEL = "claude-sonnet-4-5"
PLANS = ("storm-plan-a", "storm-plan-b", "storm-plan-c", "storm-plan-d")
SERVING_PLAN = PLANS[-1]
TURN_HEADER = "X-Storm-Turn"
MARKER = re.compile(r"\(storm turn (\d+)\)")
BOOT_SECONDS = 90.0
STOP_SECONDS = 20.0
# The backend's budget for a served turn (docs/architecture.md, bench/turn_overhead.py).
TARGET_ADDED_MEDIAN_MS = 2.0
TARGET_ADDED_P99_MS = 5.0


@dataclass(frozen=True)
class StormPlan:
    """How big the storm is and what serves it."""

    turns: int = 500
    agents: int = 50
    cli_agents: int = 5
    # Every ``async_every``-th turn is async (run by the Celery worker).
    async_every: int = 5
    web_processes: int = 2
    # Threads per web process: deploy/gunicorn.conf.py's default (WEB_THREADS).
    web_threads: int = 32
    worker_concurrency: int = 4
    # The whole storm (every answer and every async turn) must end within this.
    max_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.web_processes < 2:
            raise ValueError("the storm needs at least two web processes")
        if not 0 <= self.cli_agents <= self.agents or self.agents < 1:
            raise ValueError("cli_agents must be between 0 and agents (at least one)")
        if self.turns < self.agents:
            raise ValueError("every agent needs at least one turn")


@dataclass(frozen=True)
class Sent:
    """One turn as the client sent it and what it was answered."""

    number: int
    agent: str
    run_async: bool
    web: int
    status: int  # 0: no answer (transport error or the storm's cap)
    execution_id: str
    seconds: float


@dataclass
class StormResult:
    """What the storm measured. The correctness figures have exact targets; the
    latency figures are reported against the backend's budget for a served turn."""

    plan: StormPlan
    sent: list[Sent]
    completed: int
    failed: dict[str, int]
    lost: list[int]
    duplicated: list[int]
    commits: dict[str, int]
    assigned: dict[str, str]
    switch_notices: dict[str, int]
    duplicate_notifications: int
    notifications: dict[str, int]
    upstream_unaccounted: int  # Messages requests no recorded attempt explains
    attempts_unseen: int  # recorded attempts the upstream never saw
    answers_5xx: int
    mismatched_answers: int  # a sync answer naming another turn's execution
    added_in_thread_ms: list[float]
    added_answered_ms: list[float]
    added_plain_in_thread_ms: list[float]
    agent_ms: list[float]
    async_turn_s: list[float]
    wall_seconds: float
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # turn, code, detail
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # by part, during the storm
    processes_left: list[int] = field(default_factory=list)
    redis_keys_left: int = 0
    logs: Path = Path()

    @property
    def committed_once(self) -> int:
        return sum(
            1
            for name, count in self.commits.items()
            if count == 1 and self.assigned.get(name) == SERVING_PLAN
        )

    def problems(self) -> list[str]:
        """Every correctness figure that missed its exact target, in words."""
        found = []
        if self.completed != self.plan.turns:
            found.append(f"completed {self.completed} of {self.plan.turns} (failed: {self.failed})")
        if self.committed_once != self.plan.agents:
            wrong: dict[str, object] = {
                n: (c, self.assigned.get(n)) for n, c in self.commits.items() if c != 1
            }
            wrong = wrong or {n: a for n, a in self.assigned.items() if a != SERVING_PLAN}
            found.append(f"agents not committed exactly once to {SERVING_PLAN}: {wrong}")
        if any(count != 1 for count in self.switch_notices.values()):
            found.append(f"switch notices per agent: {self.switch_notices}")
        for label, values in (("lost", self.lost), ("duplicated", self.duplicated)):
            if values:
                found.append(f"{label} turns: {values[:20]}")
        for label, count in (
            ("duplicate notifications", self.duplicate_notifications),
            ("upstream requests without a recorded attempt", self.upstream_unaccounted),
            ("recorded attempts the upstream never saw", self.attempts_unseen),
            ("5xx answers", self.answers_5xx),
            ("answers naming another turn", self.mismatched_answers),
            ("processes left running", len(self.processes_left)),
            ("Redis keys left", self.redis_keys_left),
        ):
            if count:
                found.append(f"{label}: {count}")
        return found

    def table(self) -> list[str]:
        """The figures, each beside its target and the ratio, like the other benches."""
        rows = self._correctness_rows() + self._latency_rows()
        width = max(len(row.label) for row in rows)
        lines = [
            self._headline(),
            f"  {'figure':<{width}}  {'measured':>22}  {'target':>8}  ratio  verdict",
        ]
        lines += [
            f"  {row.label:<{width}}  {row.measured:>22}  {row.target:>8}  {row.ratio:>5}  "
            f"{row.verdict}"
            for row in rows
        ]
        lines += self._cpu_lines()
        lines.append(f"  notifications by kind: {dict(sorted(self.notifications.items()))}")
        for number, code, detail in self.failures[:10]:
            lines.append(f"  failed turn {number}: {code}: {detail}")
        lines.append(f"  (logs under {self.logs})")
        return lines

    def _headline(self) -> str:
        """The storm's size, what served it, its wall time and the machine's load."""
        plan = self.plan
        sync = sum(1 for s in self.sent if not s.run_async)
        return (
            f"storm: {plan.turns} turns ({sync} sync, {plan.turns - sync} async) across "
            f"{plan.agents} agents ({plan.cli_agents} on the Claude Code CLI), 3 of 4 plans "
            f"refusing; {plan.web_processes} gunicorn processes x {plan.web_threads} threads, "
            f"1 Celery worker x {plan.worker_concurrency}; {self.wall_seconds:.1f} s; {machine()}"
        )

    def _correctness_rows(self) -> list[Row]:
        """The figures with exact targets: completion, commits, lost and duplicated turns,
        the upstream's agreement with the rows, notifications, 5xx."""
        plan = self.plan
        completed_pct = 100.0 * self.completed / plan.turns
        counts = sorted(self.commits.values()) or [0]
        return [
            Row(
                "turns completed",
                f"{self.completed}/{plan.turns} ({completed_pct:.1f} %)",
                "100 %",
                f"{completed_pct / 100:.2f}",
                "ok" if self.completed == plan.turns else "MISSED",
            ),
            exact_row(
                "agents committed exactly once to the serving plan",
                self.committed_once,
                plan.agents,
            ),
            Row(
                "  commits per agent (min / max)",
                f"{counts[0]} / {counts[-1]}",
                "1 / 1",
                "",
                "ok" if counts[0] == counts[-1] == 1 else "MISSED",
            ),
            exact_row("lost turns (sent, no finished row)", len(self.lost), 0),
            exact_row("duplicated turns (rows per sent turn > 1)", len(self.duplicated), 0),
            exact_row("upstream requests no attempt explains", self.upstream_unaccounted, 0),
            exact_row("attempts the upstream never saw", self.attempts_unseen, 0),
            exact_row("duplicate notifications", self.duplicate_notifications, 0),
            exact_row("5xx answers", self.answers_5xx, 0),
        ]

    def _latency_rows(self) -> list[Row]:
        """The added latency against the served turn's budget, and the times beside it
        that have no target."""
        in_thread, plain = self.added_in_thread_ms, self.added_plain_in_thread_ms
        first_attempt = "  of it, turns served on the first attempt"
        answered = "added, as the client was answered"
        async_ms = [s * 1000 for s in self.async_turn_s]
        return [
            timing_row("added, in the web thread, p50", in_thread, 0.5, TARGET_ADDED_MEDIAN_MS),
            timing_row("added, in the web thread, p99", in_thread, 0.99, TARGET_ADDED_P99_MS),
            timing_row(f"{first_attempt}, p50", plain, 0.5, None),
            timing_row(f"{first_attempt}, p99", plain, 0.99, None),
            timing_row(f"{answered}, p50", self.added_answered_ms, 0.5, None),
            timing_row(f"{answered}, p99", self.added_answered_ms, 0.99, None),
            timing_row("agent server's own time (served attempt), p50", self.agent_ms, 0.5, None),
            timing_row("async turn, queued to finished, p50", async_ms, 0.5, None),
            timing_row("async turn, queued to finished, p99", async_ms, 0.99, None),
        ]

    def _cpu_lines(self) -> list[str]:
        """Where the CPU went during the storm, and the web's share per sync turn served;
        none when it was not measured."""
        if not self.cpu_seconds:
            return []
        cpu = self.cpu_seconds
        sync_served = sum(1 for s in self.sent if not s.run_async and s.status == 200) or 1
        busy = sum(cpu.values()) / ((os.cpu_count() or 1) * max(self.wall_seconds, 1e-9))
        return [
            "  CPU during the storm: "
            + ", ".join(f"{part} {seconds:.1f} s" for part, seconds in cpu.items())
            + f"; {busy:.0%} of the machine's cores over the storm's wall time",
            f"  web CPU per sync turn served: {cpu.get('web', 0) * 1000 / sync_served:.1f} ms",
        ]


@dataclass(frozen=True)
class Row:
    """One line of the storm's table: a figure as measured, beside its target."""

    label: str
    measured: str
    target: str = ""
    ratio: str = ""
    verdict: str = ""


def exact_row(label: str, measured: int, target: int, unit: str = "") -> Row:
    """A count whose target is exact: ok when equal, MISSED otherwise."""
    ratio = f"{measured / target:.2f}" if target else ("0" if measured == 0 else "inf")
    verdict = "ok" if measured == target else "MISSED"
    return Row(label, f"{measured}{unit}", f"{target}{unit}", ratio, verdict)


def timing_row(label: str, values: list[float], q: float, target: float | None) -> Row:
    """The ``q``-quantile of ``values`` (ms) beside ``target``, or reported with none;
    n/a when nothing was measured."""
    if not values:
        return Row(label, "n/a")
    measured = quantile(values, q)
    if target is None:
        return Row(label, f"{measured:.2f} ms", "none", "", "reported")
    ratio = measured / target
    verdict = "ok" if ratio <= 1 else "OVER"
    return Row(label, f"{measured:.2f} ms", f"{target:g} ms", f"{ratio:.2f}", verdict)


# Processes


def platform_environ(
    *, database_url: str, redis_url: str, simulator_url: str, var_dir: Path, **extra: str
) -> dict[str, str]:
    """The environment of a web or worker process: this checkout, the storm's database
    and Redis, this process's keys (the rows it wrote decrypt there), the simulator."""
    from django.conf import settings

    drop = {"DATABASE_URL", "REDIS_URL", "CELERY_TASK_ALWAYS_EAGER", "PYTEST_CURRENT_TEST"}
    environ = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("BENCH_")}
    environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "trinity.settings",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "SECRET_KEY": settings.SECRET_KEY,
            "TRINITY_ENCRYPTION_KEYS": ",".join(settings.TRINITY_ENCRYPTION_KEYS),
            "TRINITY_ANTHROPIC_BASE_URL": simulator_url,
            "TRINITY_CODEX_BASE_URL": simulator_url,
            "TRINITY_VAR_DIR": str(var_dir),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "DEBUG": "false",
            # INFO, as deployed: the latency figures read gunicorn's access lines.
            "LOG_LEVEL": "INFO",
        }
    )
    environ.update(extra)
    return environ


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers; bounded."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_SECONDS)
    # Whatever the group left behind (a worker's pool child): gone with the group.
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _spawn(argv: list[str], *, environ: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(  # noqa: S603 - our own interpreter and modules
            argv,
            cwd=ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@dataclass
class Web:
    """One gunicorn (deploy/gunicorn.conf.py, one worker) whose access lines record
    each turn's number, its status and gunicorn's own request time (µs: from the
    thread picking the request up to the response written)."""

    proc: subprocess.Popen[bytes]
    base_url: str
    log_path: Path


def web_start(*, environ: dict[str, str], workdir: Path, index: int, threads: int) -> Web:
    port = free_port()
    argv = [
        sys.executable, "-m", "gunicorn", "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
        "--bind", f"127.0.0.1:{port}",
        # On, with the turn's number; its lines reach the web's log (see _access_times).
        "--access-logfile", "-",
        "--access-logformat", "%({x-storm-turn}i)s %(s)s %(D)s",
    ]  # fmt: skip
    env = {**environ, "WEB_CONCURRENCY": "1", "WEB_THREADS": str(threads)}
    log_path = workdir / f"web-{index}.log"
    proc = _spawn(argv, environ=env, log_path=log_path)
    return Web(proc=proc, base_url=f"http://127.0.0.1:{port}", log_path=log_path)


def web_await(web: Web, *, deadline: float) -> None:
    while True:
        if web.proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited at startup ({web.proc.returncode})")
        try:
            httpx.get(f"{web.base_url}/api/auth/me", timeout=2.0, trust_env=False)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not answer in time") from None
            time.sleep(0.2)  # polling a real process's socket


def worker_start(
    *, environ: dict[str, str], workdir: Path, concurrency: int
) -> tuple[subprocess.Popen[bytes], str]:
    name = f"storm-{secrets.token_hex(3)}"
    argv = [
        sys.executable, "-m", "celery", "-A", "trinity", "worker",
        "--pool", "prefork", "--concurrency", str(concurrency),
        "--without-heartbeat", "--without-gossip", "--without-mingle",
        "-n", f"{name}@%h",
    ]  # fmt: skip
    return _spawn(argv, environ=environ, log_path=workdir / "worker.log"), name


def worker_await(proc: subprocess.Popen[bytes], name: str, *, deadline: float) -> None:
    """Until the worker answers a ping over the broker (it consumes from then on)."""
    from trinity.celery import app

    destination = f"{name}@{os.uname().nodename}"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the Celery worker exited at startup ({proc.returncode})")
        if app.control.ping(destination=[destination], timeout=1.0):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the Celery worker did not answer a ping in time")


def _broker_busy(redis_url: str) -> int:
    """Tasks the broker still holds: queued, or taken and not yet acknowledged
    (``acks_late``: a task is acknowledged when it finished)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.llen("celery")) + int(client.hlen("unacked"))
    finally:
        client.close()


@contextmanager
def redis_keys_removed(redis_url: str) -> Iterator[list[int]]:
    """Delete, on the way out, every key of ``redis_url``'s database that was not
    there before; yields a list that then holds how many new keys were still left."""
    import redis

    client = redis.Redis.from_url(redis_url)
    before = set(client.keys("*"))
    left: list[int] = []
    try:
        yield left
    finally:
        made = [k for k in client.keys("*") if k not in before]
        if made:
            client.delete(*made)
        left.append(sum(1 for k in client.keys("*") if k not in before))
        client.close()


# The fleet


@dataclass(frozen=True)
class Fleet:
    api_token: str
    agents: list[str]
    cli: frozenset[str]
    tokens: dict[str, str]  # plan name -> token


def fleet_create(control: Any, plan: StormPlan) -> Fleet:
    """Four plans (three exhausted upstream, one serving) and ``plan.agents`` agents,
    agent i on refusing plan i mod 3, the first ``cli_agents`` on the Claude Code CLI;
    an owner with an API token."""
    from django.contrib.auth.models import User
    from knox.models import AuthToken

    from agents.models import Agent, Runtime
    from subscriptions import services as subscription_services
    from trinity.crypto import Secret

    tokens: dict[str, str] = {}
    rows = []
    for name in PLANS:
        token = f"sk-ant-oat01-storm-{name[-1]}-{secrets.token_urlsafe(24)}"
        tokens[name] = token
        # The serving plan has room for every turn many times over.
        capacity = {"five_hour": 10**9, "seven_day": 10**9} if name == SERVING_PLAN else None
        control.register(token, kind="oauth", label=name, capacity=capacity)
        if name != SERVING_PLAN:
            control.set_usage(token, "five_hour", percent=100)
        row, _ = subscription_services.subscription_register(
            name=name, provider="anthropic", plan_type="max-20x", token=token
        )
        rows.append(row)
    owner, _ = User.objects.get_or_create(username="storm-owner")
    api_token = AuthToken.objects.create(user=owner)[1]
    names = [f"storm-agent-{i:03d}" for i in range(plan.agents)]
    for i, name in enumerate(names):
        Agent.objects.create(
            name=name,
            owner=owner,
            runtime=Runtime.CLAUDE_CODE if i < plan.cli_agents else Runtime.ANTHROPIC_API,
            model=MODEL,
            subscription=rows[i % 3],
            shared_secret=Secret(secrets.token_urlsafe(32)),
        )
    return Fleet(
        api_token=api_token,
        agents=names,
        cli=frozenset(names[: plan.cli_agents]),
        tokens=tokens,
    )


def agents_start(names: Sequence[str]) -> None:
    """Start every agent's server through the platform (local processes), a few at once."""
    from django.db import connection

    from agents import lifecycle
    from agents.models import Agent, ProcessState

    def start(name: str) -> str:
        try:
            agent = lifecycle.agent_start(agent=Agent.objects.get(name=name))
            return agent.process_state
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=6) as pool:
        states = dict(zip(names, pool.map(start, names), strict=True))
    down = [n for n, s in states.items() if s != ProcessState.RUNNING]
    if down:
        raise RuntimeError(f"agent servers did not start: {down}")


def agents_stop(names: Sequence[str]) -> None:
    from agents import lifecycle
    from agents.models import Agent

    for agent in Agent.objects.filter(name__in=names).exclude(process_handle=""):
        with suppress(Exception):  # stop the rest whatever one does
            lifecycle.agent_stop(agent=agent)


# The storm itself


def _warm_up(webs: list[Web], fleet: Fleet, threads: int) -> None:
    """A running web has imported its views and opened its threads' database
    connections (CONN_MAX_AGE): ``threads`` concurrent reads per web, a few rounds,
    before the storm. Reads only: no turn, so no commit, before the storm."""

    async def read_all() -> None:
        headers = {"Authorization": f"Token {fleet.api_token}"}
        for web in webs:
            async with httpx.AsyncClient(
                base_url=web.base_url, headers=headers, timeout=60.0, trust_env=False
            ) as client:
                for _ in range(3):
                    answers = await asyncio.gather(
                        *(client.get(f"/api/agents/{fleet.agents[i % len(fleet.agents)]}")
                          for i in range(threads))
                    )  # fmt: skip
                    bad = [a.status_code for a in answers if a.status_code != 200]
                    if bad:
                        raise RuntimeError(f"warm-up reads answered {bad[:5]}")

    asyncio.run(read_all())


async def _fire(fleet: Fleet, plan: StormPlan, webs: list[Web], deadline: float) -> list[Sent]:
    """Post every turn at once; each answer with the client's own wall time."""
    limits = httpx.Limits(max_connections=plan.turns, max_keepalive_connections=plan.turns)
    timeout = httpx.Timeout(plan.max_seconds, connect=60.0)
    headers = {"Authorization": f"Token {fleet.api_token}"}
    clients = [
        httpx.AsyncClient(
            base_url=w.base_url, headers=headers, limits=limits, timeout=timeout, trust_env=False
        )
        for w in webs
    ]
    release = asyncio.Event()

    async def turn(number: int) -> Sent:
        agent = fleet.agents[number % len(fleet.agents)]
        run_async = number % plan.async_every == plan.async_every - 1
        web = number % len(webs)
        body: dict[str, Any] = {"message": f"Say hello. (storm turn {number})"}
        if run_async:
            body["async"] = True
            # Half of the async turns are autonomous: their walk gates the last resort.
            body["trigger"] = "schedule" if (number // plan.async_every) % 2 else "api"
        await release.wait()
        start = time.perf_counter()
        try:
            response = await clients[web].post(
                f"/api/agents/{agent}/task", json=body, headers={TURN_HEADER: str(number)}
            )
        except httpx.HTTPError:
            return Sent(number, agent, run_async, web, 0, "", time.perf_counter() - start)
        seconds = time.perf_counter() - start
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        # A sync answer is the Execution (``id``); an async one is ``{execution_id}``.
        found = answer.get("execution_id") or answer.get("id") if isinstance(answer, dict) else None
        execution_id = str(found) if found else ""
        return Sent(number, agent, run_async, web, response.status_code, execution_id, seconds)

    tasks = [asyncio.ensure_future(turn(n)) for n in range(plan.turns)]
    await asyncio.sleep(0)  # every task waits at the release before one is sent
    release.set()
    done, pending = await asyncio.wait(tasks, timeout=max(1.0, deadline - time.monotonic()))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for client in clients:
        await client.aclose()
    sent = [t.result() for t in done if not t.cancelled()]
    answered = {s.number for s in sent}
    for n in range(plan.turns):
        if n not in answered:  # cut by the storm's cap: sent, never answered
            agent = fleet.agents[n % len(fleet.agents)]
            async_ = n % plan.async_every == plan.async_every - 1
            sent.append(Sent(n, agent, async_, n % len(webs), 0, "", plan.max_seconds))
    return sorted(sent, key=lambda s: s.number)


def _await_async(sent: list[Sent], redis_url: str, deadline: float) -> None:
    """Until every async turn finished and the broker holds no task (the commits'
    hot-reloads included), or the deadline."""
    from execution.models import Execution, Status

    ids = [s.execution_id for s in sent if s.run_async and s.status == 202]
    open_states = [Status.QUEUED, Status.RUNNING]
    while time.monotonic() < deadline:
        unfinished = Execution.objects.filter(pk__in=ids, status__in=open_states).count()
        if not unfinished and not _broker_busy(redis_url):
            return
        time.sleep(0.25)  # polling the real worker's progress


def _agent_times(
    var_dir: Path, names: Sequence[str]
) -> dict[str, list[tuple[datetime, datetime, bool]]]:
    """Per execution id, each attempt the agent servers logged: (start, end, served),
    from their JSON lines (``turn <id>: start``, then ``ok`` or the refusal)."""
    found: dict[str, list[tuple[datetime, datetime, bool]]] = defaultdict(list)
    for name in names:
        path = var_dir / "agents" / name / "server.log"
        if not path.exists():
            continue
        started: dict[str, list[datetime]] = defaultdict(list)
        for raw in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            execution_id = entry.get("execution_id")
            message = entry.get("message", "")
            if not execution_id or not isinstance(message, str):
                continue
            at = datetime.fromisoformat(entry["ts"])
            if message.startswith(f"turn {execution_id}: start"):
                started[execution_id].append(at)
            elif message.startswith(f"turn {execution_id}: ") and started[execution_id]:
                served = message.startswith(f"turn {execution_id}: ok")
                found[execution_id].append((started[execution_id].pop(0), at, served))
    return found


def _access_times(webs: list[Web]) -> dict[int, tuple[int, float]]:
    """Per turn number: (status, gunicorn's request time in ms), from the access lines
    in each web's log (the worker's Django LOGGING sends gunicorn.access through the
    one redacting root handler; trinity/settings.py)."""
    found: dict[int, tuple[int, float]] = {}
    for web in webs:
        for raw in web.log_path.read_text(errors="replace").splitlines():
            _, marker, rest = raw.partition(" gunicorn.access ")
            parts = rest.split()
            if marker and len(parts) == 3 and parts[0].isdigit():
                found[int(parts[0])] = (int(parts[1]), int(parts[2]) / 1000)
    return found


def _collect(
    *,
    plan: StormPlan,
    fleet: Fleet,
    sent: list[Sent],
    control: Any,
    webs: list[Web],
    var_dir: Path,
) -> StormResult:
    """The storm's figures from what was sent, the Execution rows, the notifications,
    the simulator's request log and the processes' logs (wall time and CPU unset)."""
    rows = _execution_rows(fleet.agents)
    turns = _turn_tally(sent, rows, plan.turns)
    commits = _commit_tally(fleet.agents, rows)
    unaccounted, unseen = _upstream_mismatch(control, rows, fleet.cli)
    access = _access_times(webs)
    latencies = _latencies(sent, rows, _agent_times(var_dir, fleet.agents), access)
    return StormResult(
        plan=plan,
        sent=sent,
        completed=turns.completed,
        failed=turns.failed,
        lost=turns.lost,
        duplicated=turns.duplicated,
        commits=commits.commits,
        assigned=commits.assigned,
        switch_notices=commits.switch_notices,
        duplicate_notifications=commits.duplicate_notifications,
        notifications=commits.notifications,
        upstream_unaccounted=unaccounted,
        attempts_unseen=unseen,
        answers_5xx=_answers_5xx(sent, access),
        mismatched_answers=turns.mismatched_answers,
        added_in_thread_ms=latencies.in_thread_ms,
        added_answered_ms=latencies.answered_ms,
        added_plain_in_thread_ms=latencies.plain_in_thread_ms,
        agent_ms=latencies.agent_ms,
        async_turn_s=latencies.async_turn_s,
        wall_seconds=0.0,
        failures=turns.failures,
    )


def _execution_rows(agents: Sequence[str]) -> list[dict[str, Any]]:
    """Every Execution row of the storm's agents, as the fields the figures read."""
    from execution.models import Execution

    fields = (
        "pk", "agent_name", "message", "status", "error_code", "attempts",
        "subscription_switch", "created_at", "finished_at",
    )  # fmt: skip
    return [dict(row) for row in Execution.objects.filter(agent_name__in=agents).values(*fields)]


@dataclass(frozen=True)
class TurnTally:
    """What the Execution rows say of the turns sent, each turn found by the number its
    message carries."""

    completed: int  # one row, succeeded
    failed: dict[str, int]  # rows that did not succeed, by error code (or status)
    lost: list[int]  # sent, no finished row
    duplicated: list[int]  # more than one row; -1 for each row of no sent turn
    mismatched_answers: int  # a sync answer naming another turn's execution
    failures: list[tuple[int, str, str]]  # turn, code, detail (its first 300 characters)


def _turn_tally(sent: list[Sent], rows: list[dict[str, Any]], turns: int) -> TurnTally:
    from execution.models import Status

    by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    strays = 0
    for row in rows:
        match = MARKER.search(row["message"])
        if match is None or int(match.group(1)) >= turns:
            strays += 1
            continue
        by_turn[int(match.group(1))].append(row)
    finished = {Status.SUCCEEDED, Status.FAILED}
    lost = [s.number for s in sent if not any(r["status"] in finished for r in by_turn[s.number])]
    duplicated = [n for n, found in by_turn.items() if len(found) > 1] + [-1] * strays
    completed = sum(
        1
        for s in sent
        if len(by_turn[s.number]) == 1 and by_turn[s.number][0]["status"] == "succeeded"
    )
    failed = Counter(
        r["error_code"] or r["status"] for r in rows if r["status"] != Status.SUCCEEDED
    )
    # A sync answer is the finished Execution; a 2xx that is not "succeeded" is counted
    # by ``completed`` already.
    answered_other = sum(
        1
        for s in sent
        if s.execution_id
        and by_turn[s.number]
        and s.execution_id != str(by_turn[s.number][0]["pk"])
    )
    return TurnTally(
        completed=completed,
        failed=dict(failed),
        lost=lost,
        duplicated=duplicated,
        mismatched_answers=answered_other,
        failures=_failures(rows),
    )


def _failures(rows: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """Each row that did not succeed as (turn number or -1, error code, the first 300
    characters of its detail), in order."""
    from execution.models import Execution, Status

    failures = sorted(
        (int(m.group(1)) if (m := MARKER.search(r["message"])) else -1, r["error_code"], detail)
        for r, detail in (
            (r, Execution.objects.filter(pk=r["pk"]).values_list("error_detail", flat=True)[0])
            for r in rows
            if r["status"] != Status.SUCCEEDED
        )
    )
    return [(n, c, d[:300]) for n, c, d in failures]


@dataclass(frozen=True)
class CommitTally:
    """Where each agent ended up, how often it was committed, and what it was told."""

    commits: dict[str, int]  # agent -> turns that committed a switch
    assigned: dict[str, str]  # agent -> its plan's name now
    switch_notices: dict[str, int]  # agent -> "subscription_switched" notifications
    duplicate_notifications: int
    notifications: dict[str, int]  # by kind


def _commit_tally(agents: Sequence[str], rows: list[dict[str, Any]]) -> CommitTally:
    from agents.models import Agent
    from trinity.models import Notification

    commits = {name: 0 for name in agents}
    for row in rows:
        if (row["subscription_switch"] or {}).get("committed"):
            commits[row["agent_name"]] += 1
    assigned = dict(Agent.objects.filter(name__in=agents).values_list("name", "subscription__name"))
    # A duplicate is a second notice about the same thing: the same kind, agent, plan
    # and dedup key (one headroom alert for each of three plans is three, not two
    # duplicates). Switch notices are counted per agent as well, below.
    notices = list(
        Notification.objects.values_list("kind", "agent_name", "subscription_id", "dedup_key")
    )
    per_notice = Counter(notices)
    switch_notices = {
        name: sum(
            1 for kind, agent, *_ in notices if (kind, agent) == ("subscription_switched", name)
        )
        for name in agents
    }
    return CommitTally(
        commits=commits,
        assigned={k: v or "" for k, v in assigned.items()},
        switch_notices=switch_notices,
        duplicate_notifications=sum(c - 1 for c in per_notice.values() if c > 1),
        notifications=dict(Counter(kind for kind, *_ in notices)),
    )


def _upstream_mismatch(
    control: Any, rows: list[dict[str, Any]], cli: frozenset[str]
) -> tuple[int, int]:
    """(Messages requests no recorded attempt explains, recorded attempts the upstream
    never saw).

    The upstream's view: every Messages request, by credential, served or refused,
    and streaming (the CLI) or not (the direct runtime), against the attempts the
    rows recorded. One request per attempt on both runtimes.
    """
    seen = Counter(
        (r["credential"], r["status"] == 200, bool(r["stream"]))
        for r in control.requests()
        if r["path"] == "/v1/messages"
    )
    expected: Counter[tuple[str | None, bool, bool]] = Counter()
    for row in rows:
        for attempt in row["attempts"] or []:
            key = (attempt["name"], attempt["outcome"] == "served", row["agent_name"] in cli)
            expected[key] += 1
    return sum((seen - expected).values()), sum((expected - seen).values())


def _answers_5xx(sent: list[Sent], access: dict[int, tuple[int, float]]) -> int:
    """5xx answers: those the client got, and those gunicorn logged for turns the
    client saw answered otherwise (or not at all)."""
    client_5xx = {s.number for s in sent if s.status >= 500}
    return sum(1 for s in sent if s.status >= 500) + sum(
        1 for n, (status, _) in access.items() if status >= 500 and n not in client_5xx
    )


@dataclass
class Latencies:
    """The sync turns' latency, less the agent server's own time, and the async turns'."""

    in_thread_ms: list[float] = field(default_factory=list)  # gunicorn's request time
    answered_ms: list[float] = field(default_factory=list)  # as the client was answered
    plain_in_thread_ms: list[float] = field(default_factory=list)  # served on the first try
    agent_ms: list[float] = field(default_factory=list)  # the agent server's, served attempt
    async_turn_s: list[float] = field(default_factory=list)  # queued to finished


def _latencies(
    sent: list[Sent],
    rows: list[dict[str, Any]],
    agent_times: dict[str, list[tuple[datetime, datetime, bool]]],
    access: dict[int, tuple[int, float]],
) -> Latencies:
    """Latency of the sync turns: the web's time (as gunicorn's thread measured it, and
    as the client was answered) less the agent server's own time for the served
    attempt (its JSON log lines for that execution id, ms resolution); and each async
    turn's time from its row's creation to its end."""
    rows_by_id = {str(r["pk"]): r for r in rows}
    found = Latencies()
    for s in sent:
        if s.run_async or s.status != 200 or s.number not in access:
            continue
        attempts = [a for a in agent_times.get(s.execution_id, []) if a[2]]
        if not attempts:
            continue
        begin, end, _ = attempts[-1]
        own = (end - begin).total_seconds() * 1000
        found.agent_ms.append(own)
        found.in_thread_ms.append(access[s.number][1] - own)
        found.answered_ms.append(s.seconds * 1000 - own)
        served_row = rows_by_id.get(s.execution_id)
        if served_row is not None and len(served_row["attempts"] or []) == 1:
            found.plain_in_thread_ms.append(access[s.number][1] - own)
    found.async_turn_s = [
        (r["finished_at"] - r["created_at"]).total_seconds()
        for s in sent
        if s.run_async and (r := rows_by_id.get(s.execution_id)) is not None and r["finished_at"]
    ]
    return found


def cpu_of(roots: Sequence[int]) -> float:
    """CPU seconds (user + system) of ``roots`` and every living descendant, with what
    their reaped children used (a CLI run an agent server waited for)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(f) for f in fields[11:15])
    wanted = set(roots)
    total = 0
    for pid in ticks:
        ancestor = pid
        while ancestor > 1 and ancestor not in wanted:
            ancestor = parent.get(ancestor, 0)
        if ancestor in wanted:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def storm_run(plan: StormPlan, *, database_url: str, redis_url: str, workdir: Path) -> StormResult:
    """Run the storm on the database and Redis Django uses in this process (their URLs
    for the processes started here); returns its figures once everything it started
    is stopped and every Redis key it made is deleted."""
    workdir.mkdir(parents=True, exist_ok=True)
    var_dir = workdir / "var"
    var_dir.mkdir(exist_ok=True)
    with ExitStack() as stack:
        keys_left = stack.enter_context(redis_keys_removed(redis_url))
        started = _processes_start(
            stack,
            plan,
            database_url=database_url,
            redis_url=redis_url,
            workdir=workdir,
            var_dir=var_dir,
        )
        pids = started.pids()
        _warm_up(started.webs, started.fleet, plan.web_threads)
        started.sim.control.clear_requests()  # the upstream's log holds the storm's requests only
        result = _storm_measured(started, plan, redis_url=redis_url, var_dir=var_dir)
        result.logs = workdir
    # Everything is stopped now (ExitStack, in reverse order): the worker and webs,
    # the agent servers, the simulator, then the storm's Redis keys deleted.
    result.processes_left = [pid for pid in pids if _alive(pid)]
    result.redis_keys_left = keys_left[0] if keys_left else 0
    return result


@dataclass(frozen=True)
class StormProcesses:
    """What ``_processes_start`` started: the simulator, the fleet's agent servers, the
    web processes and the Celery worker."""

    sim: Any  # simulator.process.SimulatorProcess, running
    fleet: Fleet
    webs: list[Web]
    worker: subprocess.Popen[bytes]
    agent_pids: list[int]

    def parts(self) -> dict[str, list[int]]:
        """The roots of each part's process tree, whose CPU is measured."""
        return {
            "web": [w.proc.pid for w in self.webs],
            "worker": [self.worker.pid],
            "agent servers": self.agent_pids,
            "simulator": [self.sim.pid],
        }

    def pids(self) -> list[int]:
        """Every process started, each of which must be gone at the end."""
        return [self.sim.pid, *(w.proc.pid for w in self.webs), self.worker.pid, *self.agent_pids]


def _processes_start(
    stack: ExitStack,
    plan: StormPlan,
    *,
    database_url: str,
    redis_url: str,
    workdir: Path,
    var_dir: Path,
) -> StormProcesses:
    """Start the simulator, the fleet's agent servers, the webs and the worker, each
    stopped when ``stack`` closes; returns once every one answers."""
    from django.test import override_settings

    from agents.models import Agent
    from simulator.process import SimulatorProcess

    sim = stack.enter_context(
        SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning")
    )
    assert sim.pid is not None
    # Agent servers are spawned here, by the platform's start, with JSON logs (the
    # turn's execution id on every line) under this storm's own directory.
    stack.enter_context(
        override_settings(
            TRINITY_ANTHROPIC_BASE_URL=sim.base_url,
            TRINITY_CODEX_BASE_URL=sim.base_url,
            VAR_DIR=var_dir,
            LOG_FORMAT="json",
        )
    )
    fleet = fleet_create(sim.control, plan)
    stack.callback(agents_stop, fleet.agents)
    environ = platform_environ(
        database_url=database_url, redis_url=redis_url, simulator_url=sim.base_url, var_dir=var_dir
    )
    # Web and worker boot while the agent servers start.
    webs = [
        web_start(environ=environ, workdir=workdir, index=i, threads=plan.web_threads)
        for i in range(plan.web_processes)
    ]
    worker, worker_name = worker_start(
        environ=environ, workdir=workdir, concurrency=plan.worker_concurrency
    )
    for proc in [w.proc for w in webs] + [worker]:
        stack.callback(_stop_group, proc)
    agents_start(fleet.agents)
    agent_pids = [
        int(h) for h in Agent.objects.filter(name__in=fleet.agents).values_list(
            "process_handle", flat=True
        ) if h
    ]  # fmt: skip
    boot_deadline = time.monotonic() + BOOT_SECONDS
    for web in webs:
        web_await(web, deadline=boot_deadline)
    worker_await(worker, worker_name, deadline=boot_deadline)
    return StormProcesses(sim=sim, fleet=fleet, webs=webs, worker=worker, agent_pids=agent_pids)


def _storm_measured(
    started: StormProcesses, plan: StormPlan, *, redis_url: str, var_dir: Path
) -> StormResult:
    """Fire every turn, wait for the async ones, and collect the figures with the
    storm's wall time and each part's CPU during it."""
    parts = started.parts()
    cpu_before = {part: cpu_of(roots) for part, roots in parts.items()}
    client_before = time.process_time()
    storm_start = time.monotonic()
    deadline = storm_start + plan.max_seconds
    sent = asyncio.run(_fire(started.fleet, plan, started.webs, deadline))
    _await_async(sent, redis_url, deadline)
    wall = time.monotonic() - storm_start
    cpu = {p: cpu_of(roots) - cpu_before[p] for p, roots in parts.items()}
    cpu["client (this process)"] = time.process_time() - client_before
    result = _collect(
        plan=plan,
        fleet=started.fleet,
        sent=sent,
        control=started.sim.control,
        webs=started.webs,
        var_dir=var_dir,
    )
    result.wall_seconds = wall
    result.cpu_seconds = cpu
    return result


def database_url_of(settings_dict: dict[str, Any]) -> str:
    """The URL of the Postgres database a Django connection's settings name."""
    if settings_dict["ENGINE"] != "django.db.backends.postgresql":
        raise RuntimeError("the storm runs on Postgres: its web and worker share the database")
    user = settings_dict["USER"] or "root"
    host = settings_dict["HOST"] or "127.0.0.1"
    return f"postgres://{user}@{host}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
