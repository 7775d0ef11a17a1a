"""Postgres restarts between two turns and during one.

Real parts: a Postgres cluster and a Redis server of this test's own (the machine's
shared ones are never touched), a gunicorn web process (deploy/gunicorn.conf.py) and
a Celery worker on them, the agent server the platform spawns with the real Claude
Code CLI, and the simulator. The cluster is really stopped and started (``pg_ctl``)
while the web and worker processes keep running: they must reconnect by themselves
(persistent connections with ``CONN_HEALTH_CHECKS``), and a turn in flight across the
restart must end ``succeeded`` or ``failed`` with a clear error, never ``running``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.faults.harness import (
    CeleryWorker,
    PostgresCluster,
    descendants_of,
    gunicorn,
    manage,
    platform_env,
    throwaway_postgres,
    throwaway_redis,
    wait_until,
)
from tests.operations.services import REPO
from tests.subscriptions.factories import plan_token

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TURN_SECONDS = 120.0
SETUP = """
from django.contrib.auth.models import User
from knox.models import AuthToken
from agents.services import agent_create
from subscriptions import services
admin = User.objects.create_superuser("admin", "admin@example.invalid", None)
sub, _ = services.subscription_register(
    name="plan-a", provider="anthropic", plan_type="max-20x", token={token!r}
)
agent = agent_create(owner=admin, name="bot", runtime="claude-code",
                     model="claude-sonnet-4-5", autostart=False, auto_assign=False)
services.assignment_set(agent=agent, subscription_id=sub.pk)
print("TOKEN=" + AuthToken.objects.create(user=admin)[1])
"""


@dataclass
class Platform:
    url: str
    api_token: str
    postgres: PostgresCluster
    worker: CeleryWorker

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(
            f"{self.url}{path}",
            json=body,
            headers={"Authorization": f"Token {self.api_token}"},
            timeout=TURN_SECONDS,
        )

    def rows(self) -> dict[str, tuple[str, str]]:
        """Every turn's (status, error_code), read straight from the database."""
        with psycopg.connect(self.postgres.url.replace("postgres://", "postgresql://")) as conn:
            found = conn.execute("SELECT id, status, error_code FROM execution_execution")
            return {str(pk): (status, code) for pk, status, code in found}

    def finished(self, execution_id: str) -> tuple[str, str] | None:
        status, code = self.rows()[execution_id]
        return None if status in ("queued", "running") else (status, code)

    def restart_postgres(self) -> None:
        self.postgres.stop()
        self.postgres.start()

    def agent_server_pid(self) -> int:
        with psycopg.connect(self.postgres.url.replace("postgres://", "postgresql://")) as conn:
            row = conn.execute(
                "SELECT process_handle FROM agents_agent WHERE name='bot'"
            ).fetchone()
        assert row is not None and row[0]
        return int(row[0])


@pytest.fixture
def platform(
    simulator: SimulatorProcess, control: SimulatorControl, tmp_path: Path
) -> Iterator[Platform]:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-a")
    with throwaway_postgres() as postgres, throwaway_redis() as redis:
        env = platform_env(
            tmp_path / "var",
            DATABASE_URL=postgres.url,
            REDIS_URL=redis.url,
            TRINITY_ANTHROPIC_BASE_URL=simulator.base_url,
        )
        manage(env, "migrate", "--noinput")
        setup = subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "manage.py", "shell", "-c", SETUP.format(token=token)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert setup.returncode == 0, setup.stderr[-2000:]
        api_token = setup.stdout.split("TOKEN=", 1)[1].strip()
        worker = CeleryWorker(env, log_path=tmp_path / "worker.log", name="faults-pg")
        try:
            worker.start()
            with gunicorn(env, log_path=tmp_path / "web.log", threads=4) as url:
                platform = Platform(url, api_token, postgres, worker)
                try:
                    yield platform
                finally:
                    # Agent servers outlive web and worker by design: stop ours.
                    with contextlib.suppress(Exception):
                        os.killpg(platform.agent_server_pid(), signal.SIGKILL)
        finally:
            worker.stop()


def sync_turn(platform: Platform) -> httpx.Response:
    return platform.post("/api/agents/bot/task", {"message": "say hi"})


def async_turn(platform: Platform) -> str:
    response = platform.post("/api/agents/bot/task", {"message": "say hi", "async": True})
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def await_finished(platform: Platform, execution_id: str) -> tuple[str, str]:
    return wait_until(
        lambda: platform.finished(execution_id), seconds=TURN_SECONDS, what="the turn to finish"
    )


def test_web_and_worker_reconnect_by_themselves_after_a_restart_between_turns(
    platform: Platform,
) -> None:
    # Both processes hold a persistent connection before the restart.
    assert sync_turn(platform).status_code == 200
    assert await_finished(platform, async_turn(platform)) == ("succeeded", "")

    platform.restart_postgres()

    # The first request after the restart finds its connection dead and reconnects.
    for _ in range(4):  # every web thread's connection went stale
        served = sync_turn(platform)
        assert served.status_code == 200, served.text
    assert await_finished(platform, async_turn(platform)) == ("succeeded", "")


def test_a_turn_in_flight_across_a_restart_finishes_or_fails_clearly_never_stays_running(
    platform: Platform, control: SimulatorControl
) -> None:
    assert sync_turn(platform).status_code == 200  # the agent server is up
    server = platform.agent_server_pid()
    control.set_latency(4_000)

    answers: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answers.append(sync_turn(platform)))
    thread.start()
    wait_until(
        lambda: any(b"claude" in cmd for _, cmd in descendants_of(server)),
        seconds=30,
        what="the sync turn to be at the agent server",
    )
    platform.restart_postgres()
    thread.join(timeout=TURN_SECONDS)
    sync_answer = answers[0]

    queued = async_turn(platform)
    wait_until(
        lambda: any(b"claude" in cmd for _, cmd in descendants_of(server)),
        seconds=30,
        what="the async turn to be at the agent server",
    )
    platform.restart_postgres()
    async_outcome = await_finished(platform, queued)
    control.set_latency(0)

    rows = platform.rows()
    assert not [pk for pk, (status, _) in rows.items() if status in ("running", "queued")], rows
    # Both were served while the database restarted; the row was written on a new
    # connection (before, the dead one failed both the write and the failure's own,
    # and the row stayed running until the reaper).
    assert sync_answer.status_code == 200, sync_answer.text
    assert rows[str(sync_answer.json()["id"])] == ("succeeded", "")
    assert async_outcome == ("succeeded", "")
    # And both processes serve the next turns without a restart of their own.
    assert sync_turn(platform).status_code == 200
    assert await_finished(platform, async_turn(platform)) == ("succeeded", "")
