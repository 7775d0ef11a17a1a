"""Boot Django for a benchmark on throwaway backends, never on the ones in use.

The database is a temporary SQLite file unless BENCH_DATABASE_URL names another; the
cache is the embedded default (the database cache, in that SQLite file) unless
BENCH_REDIS_URL names a Redis. DATABASE_URL and
REDIS_URL are ignored on purpose: a benchmark writes thousands of rows and keys.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import httpx
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulator.process import ListeningProcess, SimulatorProcess  # noqa: E402 - needs ROOT on the path

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from subscriptions.models import Subscription


def boot(*, database_url: str | None = None, redis_url: str | None = None) -> Path:
    """Configure and set up Django; returns the temporary directory in use.

    ``database_url`` / ``redis_url`` override BENCH_DATABASE_URL / BENCH_REDIS_URL
    (the turn benchmarks pass a throwaway Postgres database and a checked Redis one).
    """
    workdir = Path(tempfile.mkdtemp(prefix="trinity-bench-"))
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "trinity.settings"
    os.environ["TRINITY_VAR_DIR"] = str(workdir)
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["DATABASE_URL"] = database_url or os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}"
    )
    os.environ.pop("REDIS_URL", None)
    redis_url = redis_url or os.environ.get("BENCH_REDIS_URL")
    if redis_url:
        os.environ["REDIS_URL"] = redis_url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    call_command("createcachetable", verbosity=0)
    return workdir


def backends() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    cache = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    return f"database={db} cache={cache}"


def line(label: str, measured: float, target: float | None, unit: str) -> str:
    if target is None:
        return f"{label:<58} {measured:9.2f} {unit:<3} (no target; reported)"
    ratio = measured / target
    verdict = "ok" if ratio <= 1 else "OVER"
    return (
        f"{label:<58} {measured:9.2f} {unit:<3} target {target:g} {unit}  "
        f"ratio {ratio:.2f}  {verdict}"
    )


# The turn benchmarks (turn_overhead.py, walked_turn.py): Postgres and Redis, real
# processes on loopback (provider simulator, one agent server, gunicorn as deployed).

WEB_CONF = ROOT / "deploy" / "gunicorn.conf.py"
TURN_MODEL = "claude-sonnet-4-5"
TURN_MESSAGE = "Say hello."


def turn_backends() -> tuple[str, str]:
    """BENCH_DATABASE_URL (a Postgres server) and BENCH_REDIS_URL, or exit saying so."""
    database_url = os.environ.get("BENCH_DATABASE_URL", "")
    redis_url = os.environ.get("BENCH_REDIS_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")) or not redis_url:
        raise SystemExit(
            "this benchmark runs on Postgres and Redis: set BENCH_DATABASE_URL=postgres://... "
            "(a throwaway database is created beside the one it names, then dropped) and "
            "BENCH_REDIS_URL=redis://.../N (an empty database; flushed afterwards)"
        )
    return database_url, redis_url


@contextmanager
def throwaway_postgres(url: str) -> Iterator[str]:
    """A fresh database on the server ``url`` names (never that database), dropped after."""
    import psycopg

    parts = urlsplit(url)
    base = parts.path.lstrip("/") or "postgres"
    name = f"{base}_bench_{secrets.token_hex(4)}"
    # CREATE and DROP run from the maintenance database, as Django's test runner does:
    # the database ``url`` names need not exist.
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(maintenance, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextmanager
def empty_redis(url: str) -> Iterator[None]:
    """Use the Redis database ``url`` names only if it is empty; flush it afterwards
    (snapshots, refusal marks, dedup markers, the Celery tasks the web enqueued)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        if client.dbsize():
            raise SystemExit(f"BENCH_REDIS_URL: database {url.rsplit('/', 1)[-1]} is not empty")
        yield
    finally:
        client.flushdb()
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AgentServerProcess(ListeningProcess):
    """One agent server (``python -m agent_server``) on the direct Messages API runtime,
    upstream the simulator; nothing inherited that could carry a real credential."""

    banner = "agent server"

    def __init__(self, *, home: Path, secret: str, simulator_url: str, log_path: Path) -> None:
        super().__init__(startup_timeout=30.0, stop_timeout=10.0, log_path=log_path)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "TRINITY_AGENT_SECRET": secret,
            "TRINITY_AGENT_HOME": str(home),
            "TRINITY_AGENT_RUNTIME": "anthropic-api",
            "TRINITY_AGENT_MODEL": TURN_MODEL,
            "ANTHROPIC_BASE_URL": simulator_url,
        }

    def command(self) -> list[str]:
        argv = ["--host", "127.0.0.1", "--port", "0", "--log-level", "warning"]
        return [sys.executable, "-m", "agent_server", *argv]

    def environment(self) -> dict[str, str]:
        return self.env


class WebProcess:
    """gunicorn with deploy/gunicorn.conf.py, as deployed, bound to a loopback port.

    ``environ`` is the web's environment (the benchmark's database and Redis, its
    TRINITY_VAR_DIR so the encryption key is the one the rows were written with).
    ``stop`` sends SIGTERM, then kills the process group if it lingers.
    """

    def __init__(
        self, *, environ: dict[str, str], log_path: Path, workers: int = 1, root: Path = ROOT
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.environ = {**environ, "WEB_CONCURRENCY": str(workers)}
        self.log_path = log_path
        # Another checkout (a proposed change) runs from its own tree and conf file.
        self.root = root
        self._proc: subprocess.Popen[bytes] | None = None

    def cpu_seconds(self) -> float:
        """User + system CPU of the worker processes so far (not the master's)."""
        assert self._proc is not None
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self._proc.pid:  # ppid: a worker of this master
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def start(self, timeout: float = 30.0) -> WebProcess:
        log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "-c",
                    str(self.root / WEB_CONF.relative_to(ROOT)),
                ]
                + ["--bind", f"127.0.0.1:{self.port}"],
                cwd=self.root,
                env=self.environ,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited at startup; see {self.log_path}")
            try:
                httpx.get(f"{self.base_url}/api/auth/me", timeout=1.0)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)  # a retry pause while the server starts
        self.stop()
        raise RuntimeError(f"gunicorn did not answer in time; see {self.log_path}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> WebProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def web_environ(**overrides: str) -> dict[str, str]:
    """The web's environment: this process's (after ``boot``), logging as deployed
    (INFO, deploy/trinity.env.example) unless BENCH_WEB_LOG_LEVEL says otherwise."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    environ["LOG_LEVEL"] = os.environ.get("BENCH_WEB_LOG_LEVEL", "INFO")
    environ["DEBUG"] = "false"
    environ.pop("CELERY_TASK_ALWAYS_EAGER", None)
    environ.update(overrides)
    return environ


@dataclass(frozen=True)
class Fleet:
    """What ``fleet_create`` made: the API token, and each agent with its plan token."""

    api_token: str
    agents: list[tuple[str, int, str]]  # (agent name, subscription id, plan token)
    tokens: dict[int, str]  # subscription id -> plan token


def fleet_create(
    *, subscriptions: int, agents: int, endpoint: str, handle: str, secret: str, now: datetime
) -> Fleet:
    """``subscriptions`` plans (fresh, serving headroom readings in the store) and
    ``agents`` agents, agent i assigned to plan i, every one recorded as running on the
    one agent server at ``endpoint`` (the override carries each turn's credential, so
    one server serves them all); an owner with an API token (knox).
    """
    from django.contrib.auth.models import User
    from knox.models import AuthToken

    tokens = [
        f"sk-ant-oat01-bench-{i:04d}-{secrets.token_urlsafe(24)}" for i in range(subscriptions)
    ]
    rows = _plans_create(tokens)
    owner = User.objects.create(username="bench-owner")
    api_token = AuthToken.objects.create(user=owner)[1]
    _agents_create(rows[:agents], owner=owner, endpoint=endpoint, handle=handle, secret=secret)
    _serving_readings(rows, now=now)
    return Fleet(
        api_token=api_token,
        agents=[(f"agent-{i:03d}", rows[i].pk, tokens[i]) for i in range(agents)],
        tokens={row.pk: token for row, token in zip(rows, tokens, strict=True)},
    )


def _plans_create(tokens: list[str]) -> list[Subscription]:
    """A subscription (``plan-<i>``) per token, in order; returns the rows."""
    from subscriptions.models import Subscription
    from trinity.crypto import Secret

    return Subscription.objects.bulk_create(
        [
            Subscription(
                name=f"plan-{i:04d}",
                provider="anthropic",
                plan_type="max-20x",
                token=Secret(token),
                token_fingerprint=token[-4:],
            )
            for i, token in enumerate(tokens)
        ],
        batch_size=500,
    )


def _agents_create(
    plans: list[Subscription], *, owner: User, endpoint: str, handle: str, secret: str
) -> None:
    """Agent i (``agent-<i>``) on ``plans[i]``, recorded as running at ``endpoint``."""
    from agents.models import Agent, AuthMode, ProcessState, Runtime
    from trinity.crypto import Secret

    shared = Secret(secret)
    Agent.objects.bulk_create(
        [
            Agent(
                name=f"agent-{i:03d}",
                # bulk_create skips the save() that sets the unique runtime key.
                runtime_key=f"agent-{i:03d}",
                owner=owner,
                runtime=Runtime.ANTHROPIC_API,
                model=TURN_MODEL,
                subscription=plan,
                endpoint=endpoint,
                process_handle=handle,
                process_state=ProcessState.RUNNING,
                auth_mode=AuthMode.SUBSCRIPTION,
                shared_secret=shared,
            )
            for i, plan in enumerate(plans)
        ],
        batch_size=500,
    )


def _serving_readings(plans: list[Subscription], *, now: datetime) -> None:
    """Fresh, serving readings (0-60 % used) in the store: the pre-dispatch check
    dispatches as assigned, and a walk ranks by measured headroom."""
    from routing.headroom.reading import Reading, ReadingStatus, WindowReading
    from subscriptions.headroom.store import snapshots_write

    five_resets, seven_resets = now + timedelta(hours=3), now + timedelta(days=3)
    snapshots_write(
        {
            row.pk: Reading(
                fetched_at=now - timedelta(seconds=i % 600),
                status=ReadingStatus.OK,
                windows={
                    "five_hour": WindowReading(float(i % 60), five_resets, "allowed"),
                    "seven_day": WindowReading(float(i * 7 % 60), seven_resets, "allowed"),
                },
                source="probe",
            )
            for i, row in enumerate(plans)
        }
    )


@dataclass(frozen=True)
class TurnRig:
    """The turn benchmarks' processes: the simulator, one agent server and the fleet
    recorded as running on it; ``web`` makes (does not start) a web whose upstream is
    the simulator."""

    workdir: Path
    sim: SimulatorProcess
    server: AgentServerProcess
    secret: str
    fleet: Fleet

    def web(self, log_name: str, *, root: Path = ROOT, **overrides: str) -> WebProcess:
        environ = web_environ(TRINITY_ANTHROPIC_BASE_URL=self.sim.base_url, **overrides)
        return WebProcess(environ=environ, log_path=self.workdir / f"{log_name}.log", root=root)

    def candidates(self, roots: list[Path]) -> dict[str, WebProcess]:
        """A web per other checkout (a proposed change), each run from its own tree."""
        return {
            f"candidate {root.name}": self.web(f"web-{root.name}", root=root.resolve())
            for root in roots
        }


@contextmanager
def turn_rig(workdir: Path, *, subscriptions: int, agents: int) -> Iterator[TurnRig]:
    """Start the simulator and an agent server upstream of it, create the fleet
    (``fleet_create``) on that server; both processes are stopped on the way out."""
    secret = secrets.token_urlsafe(32)
    home = workdir / "agent-home"
    home.mkdir()
    with (
        SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning") as sim,
        AgentServerProcess(
            home=home,
            secret=secret,
            simulator_url=sim.base_url,
            log_path=workdir / "agent-server.log",
        ) as server,
    ):
        assert server.pid is not None
        fleet = fleet_create(
            subscriptions=subscriptions,
            agents=agents,
            endpoint=server.base_url,
            handle=str(server.pid),
            secret=secret,
            now=datetime.now(tz=UTC),
        )
        yield TurnRig(workdir=workdir, sim=sim, server=server, secret=secret, fleet=fleet)


def direct_body(*, token: str, timeout_seconds: float = 600.0) -> dict[str, object]:
    """What the dispatch loop sends the agent server for a served first attempt."""
    return {
        "execution_id": str(uuid.uuid4()),
        "message": TURN_MESSAGE,
        "timeout_seconds": timeout_seconds,
        "model": TURN_MODEL,
        "auth_override": {"oauth_token": token},
    }


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (statistics.quantiles' inclusive method)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load {load}"


def wsgi_turn(agent_name: str, api_token: str) -> tuple[int, dict[str, object]]:
    """POST a turn through the web's WSGI application in this process (no gunicorn, no
    HTTP parsing); returns the status code and the JSON answer."""
    import io
    import json

    from trinity.wsgi import application

    body = json.dumps({"message": TURN_MESSAGE}).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": f"/api/agents/{agent_name}/task",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Token {api_token}",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    status: list[str] = []

    def start_response(
        code: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        status.append(code)
        return lambda _: None  # the WSGI write(): Django never calls it

    chunks = application(environ, start_response)
    return int(status[0].split()[0]), json.loads(b"".join(chunks))


def log_as_deployed() -> None:
    """This process logs at INFO like the deployed web (so log lines and their
    redaction cost what they cost there), into memory instead of the terminal."""
    import io
    import logging

    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(io.StringIO())


def cpu_and_wall_profiles(run: Callable[[], object], *, title: str, top: int = 35) -> str:
    """``run`` under cProfile twice: timed by this thread's CPU (what the backend
    computes) and by the wall clock (adding what it waits for); both top lists."""
    import cProfile
    import io
    import pstats

    out = io.StringIO()
    for clock, timer in (("CPU", time.thread_time), ("wall", time.perf_counter)):
        profiler = cProfile.Profile(timer)
        profiler.enable()
        run()
        profiler.disable()
        print(f"  cProfile ({clock} time) of {title}:", file=out)
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
