"""Throwaway services and web processes for the operations tests.

The machine's shared Postgres and Redis serve other test runs, so anything these tests
stop is their own: a Redis server and a Postgres cluster started here on free loopback
ports, in temporary directories, and stopped at teardown. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]
BOOT_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, *, seconds: float, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the process for port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listened on port {port} in {seconds} s")
            time.sleep(0.1)  # polling a real process's socket


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


@dataclass
class RedisServer:
    """A redis-server of this test's own, with no persistence; stop and start it at will."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.port, seconds=BOOT_SECONDS, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


def _postgres_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        pytest.fail(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    return str(found[-1])


@dataclass
class PostgresCluster:
    """A Postgres cluster of this test's own (trust auth, loopback), run as ``postgres``.

    The server refuses to run as root, so the cluster belongs to the ``postgres`` user
    when the test runs as root.
    """

    directory: Path
    port: int = field(default_factory=free_port)
    user: str = "trinity"

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/trinity"

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, user="postgres")
        self._run(
            _postgres_bin("initdb"), "-D", str(self.directory / "data"), "-U", self.user,
            "--auth=trust", "--no-sync",
        )  # fmt: skip
        self.start()
        with psycopg.connect(
            f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE trinity")

    def start(self) -> None:
        self._run(
            _postgres_bin("pg_ctl"), "-D", str(self.directory / "data"), "-w", "-t", "60",
            "-l", str(self.directory / "server.log"),
            "-o", f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        self._run(
            _postgres_bin("pg_ctl"), "-D", str(self.directory / "data"), "-w", "-t", "60",
            "-m", "fast", "stop",
        )  # fmt: skip


@contextmanager
def throwaway_postgres() -> Iterator[PostgresCluster]:
    # Not pytest's tmp_path: its parents are private to root, and the server runs as
    # the postgres user.
    directory = Path(tempfile.mkdtemp(prefix="trinity-pg-"))
    directory.chmod(0o755)
    cluster = PostgresCluster(directory=directory)
    try:
        cluster.init()
        yield cluster
    finally:
        try:
            cluster.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def throwaway_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def shared_database_url() -> str:
    """The URL of the test's own database, for a subprocess (web, worker) that must
    share it; fails the test on the embedded SQLite default."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.fail("this test needs Postgres: its processes share the test database")
    user = db["USER"] or "root"
    return f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def platform_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a platform process (web, manage.py) run from this checkout.

    Its local agents' OS users (as root) are tagged with `var_dir`: the session's end
    removes them (tests/conftest.py), since that process cannot say which it made."""
    from agents.runtimes import local
    from agents.runtimes.agent_users import installation_tag

    local.user_tags.add(installation_tag(var_dir))
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "trinity.settings",
            "TRINITY_VAR_DIR": str(var_dir),
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def manage(env: Mapping[str, str], *argv: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=REPO,
        env=dict(env),
        check=True,
        capture_output=True,
        timeout=300,
    )


@contextmanager
def gunicorn(
    env: Mapping[str, str],
    *,
    log_path: Path,
    workers: int = 1,
    threads: int = 4,
    worker_class: str | None = None,
) -> Iterator[str]:
    """gunicorn with deploy/gunicorn.conf.py (its hooks included) on a free loopback port:
    its uvicorn workers on trinity.asgi with ``threads`` requests inside Django at once
    (WEB_THREADS), or another ``worker_class`` (a WSGI one, e.g. "sync") on trinity.wsgi."""
    port = free_port()
    log = log_path.open("wb")
    argv = [
        sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
    ]  # fmt: skip
    if worker_class is not None:
        argv += ["--worker-class", worker_class, "--threads", str(threads)]
        argv += ["trinity.wsgi:application"]
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env={**env, "WEB_THREADS": str(max(threads, 2))},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + BOOT_SECONDS
        while True:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited at boot; see {log_path}")
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not answer in time; see {log_path}")
                time.sleep(0.2)  # polling a real process's socket
        yield url
    finally:
        _stop(proc)
        log.close()
