"""What the fault tests share: the real parts, started, stopped and killed for real.

The machine's shared Postgres and Redis serve other engineers' test runs, so every
part a test stops or kills is its own: a Redis server and a Postgres cluster on free
loopback ports (``tests/operations/services.py`` starts them), a Celery worker, a web
process, and the agent servers the platform itself spawns. Every wait is bounded and
everything started here is stopped at teardown, whatever the test did to it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from tests.execution.support import (
    agent_on,
    children_of,
    cli_child,
    descendants_of,
    messages_sent,
    register_plan,
    task,
    turn_in_background,
    wait_until,
)
from tests.operations.services import (
    REPO,
    PostgresCluster,
    RedisServer,
    free_port,
    gunicorn,
    manage,
    platform_env,
    shared_database_url,
    throwaway_postgres,
    throwaway_redis,
)
from tests.procs import alive

__all__ = [
    "PostgresCluster",
    "RedisServer",
    "CeleryWorker",
    "agent_on",
    "alive",
    "children_of",
    "cli_child",
    "descendants_of",
    "free_port",
    "gunicorn",
    "manage",
    "messages_sent",
    "platform_env",
    "redis_cache",
    "register_plan",
    "task",
    "shared_database_url",
    "throwaway_postgres",
    "throwaway_redis",
    "turn_in_background",
    "wait_until",
]

BOOT_SECONDS = 60.0


@contextmanager
def redis_cache(url: str) -> Iterator[None]:
    """The in-process platform's cache (snapshots, markers, dedup) on the Redis at ``url``,
    with the same client options the settings give the shared one."""
    default = settings.CACHES["default"]
    if default["BACKEND"] != "django_redis.cache.RedisCache":
        pytest.fail("this test needs REDIS_URL: it stops a Redis of its own under the cache")
    with override_settings(CACHES={"default": {**default, "LOCATION": url}}):
        yield


def stop_process_group(proc: subprocess.Popen[bytes], *, grace: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


class CeleryWorker:
    """A real ``celery -A <app> worker`` (prefork, one pool process) in its own group.

    ``start`` returns once it answers a ping over the broker; ``kill`` SIGKILLs the
    whole group (main process and pool), as an OOM kill or a host loss would.
    """

    def __init__(
        self, env: Mapping[str, str], *, log_path: Path, name: str, app: str = "trinity"
    ) -> None:
        self.env = dict(env)
        self.app = app
        self.log_path = log_path
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CeleryWorker:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter
            [
                sys.executable, "-m", "celery", "-A", self.app, "worker",
                "--pool", "prefork", "--concurrency", "1", "--without-heartbeat",
                "--without-gossip", "--without-mingle", "-n", f"{self.name}@%h",
            ],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        wait_until(self._answers_ping, seconds=BOOT_SECONDS, what="the worker to answer a ping")
        return self

    def _answers_ping(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"the worker exited with {self.proc.returncode}; see {self.log_path}")
        ping = subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "-m", "celery", "-A", self.app, "inspect", "ping",
             "-d", f"{self.name}@{os.uname().nodename}", "--timeout", "2"],
            cwd=REPO, env=self.env, capture_output=True, timeout=30, check=False,
        )  # fmt: skip
        return ping.returncode == 0

    def kill(self) -> None:
        """SIGKILL the main process and its pool at once; bounded wait for the exit."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process_group(self.proc)
            self.proc = None


@contextmanager
def celery_worker(env: Mapping[str, str], *, log_path: Path, name: str) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(env, log_path=log_path, name=name)
    try:
        yield worker.start()
    finally:
        worker.stop()


def api_get(url: str, token: str, path: str) -> httpx.Response:
    return httpx.get(f"{url}{path}", headers={"Authorization": f"Token {token}"}, timeout=30)
