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
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
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
from tests.subscriptions.factories import plan_token

__all__ = [
    "PostgresCluster",
    "RedisServer",
    "CeleryWorker",
    "agent_on",
    "alive",
    "children_of",
    "cli_child",
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


def wait_until(check: Callable[[], Any], *, seconds: float, what: str) -> Any:
    """Poll ``check`` (a real process's state) until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(0.05)  # polling a real process, not waiting for time to pass


# The upstream and the platform's objects


def register_plan(control: SimulatorControl, name: str) -> tuple[Subscription, str]:
    """A plan subscription known to the simulator and to the platform."""
    token = plan_token()
    control.register(token, kind="oauth", label=name)
    subscription, _ = subscription_services.subscription_register(
        name=name, provider="anthropic", plan_type="max-20x", token=token
    )
    return subscription, token


def agent_on(owner: Any, subscription: Subscription, name: str = "bot") -> Agent:
    agent = AgentFactory.create(name=name, owner=owner)
    return subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)


def messages_sent(control: SimulatorControl) -> list[tuple[str | None, int]]:
    """(credential, status) of every turn's Messages request the upstream saw, in order."""
    return [
        (r["credential"], r["status"])
        for r in control.requests()
        if r["path"] == "/v1/messages" and r["stream"]
    ]


def task(client: APIClient, **body: object) -> dict[str, Any]:
    response = client.post("/api/agents/bot/task", {"message": "say hi", **body}, format="json")
    data: dict[str, Any] = response.json()
    data["http_status"] = response.status_code
    return data


def turn_in_background(
    client: APIClient, **body: object
) -> tuple[threading.Thread, dict[str, Any]]:
    """Post a turn from a thread with its own database connection (closed after)."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result.update(task(client, **body))
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="turn-in-background")
    thread.start()
    return thread, result


# Processes


def children_of(pid: int) -> list[tuple[int, bytes]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append((int(entry.name), cmdline))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cli_child(agent: Agent, *, seconds: float = 30.0) -> int:
    """The pid of the Claude Code CLI the agent's server spawned for a turn in flight."""
    server = int(agent.process_handle)

    def find() -> int | None:
        for pid, cmdline in children_of(server):
            if b"claude" in cmdline:
                return pid
        return None

    return int(wait_until(find, seconds=seconds, what="the CLI to start"))


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
