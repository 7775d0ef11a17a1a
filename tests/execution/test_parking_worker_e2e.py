"""A parked turn's re-dispatch survives the worker that held it.

Real parts: two Celery worker processes (prefork) on the test database with a broker
of this test's own (a throwaway Redis), the agent server with the real Claude Code
CLI, the simulator. The re-dispatch is published with its ``eta``; the worker holding
it (unacknowledged, waiting for the instant) is SIGKILLed; the broker gives it to the
next worker, which runs the turn once at its instant.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from agents import lifecycle
from execution import parking, services, tasks
from execution.models import Execution, Status
from simulator.control import SimulatorControl
from tests.faults.harness import (
    CeleryWorker,
    RedisServer,
    agent_on,
    messages_sent,
    platform_env,
    register_plan,
    shared_database_url,
    throwaway_redis,
    wait_until,
)
from trinity import clock
from trinity.celery import app

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The broker redelivers what a killed worker held after seconds here, not an hour.
SHORT_VISIBILITY_APP = "tests.faults.worker_app"
PARKED_FOR = timedelta(seconds=8)


@pytest.fixture
def broker() -> Iterator[RedisServer]:
    with throwaway_redis() as server:
        yield server


def worker(tmp_path: Path, broker: RedisServer, name: str) -> CeleryWorker:
    env = platform_env(
        tmp_path,
        DATABASE_URL=shared_database_url(),
        REDIS_URL=broker.url,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=settings.TRINITY_ANTHROPIC_BASE_URL,
    )
    return CeleryWorker(env, log_path=tmp_path / f"{name}.log", name=name, app=SHORT_VISIBILITY_APP)


def test_a_parked_turn_held_by_a_killed_worker_runs_once_on_the_next_worker(
    broker: RedisServer, control: SimulatorControl, owner: User, tmp_path: Path
) -> None:
    a, _ = register_plan(control, "plan-a")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    execution = services.execution_create(
        agent=agent, message="say hi", trigger="schedule", timeout_seconds=60, queued=True
    )
    Execution.objects.filter(pk=execution.pk).update(status=Status.RUNNING)
    execution.refresh_from_db()
    control.clear_requests()

    first = worker(tmp_path, broker, "parked-1")
    second = worker(tmp_path, broker, "parked-2")
    try:
        first.start()
        # Parked once the first worker is up, so it holds the message before the instant.
        until = clock.now() + PARKED_FOR
        # The control fixture's eager Celery delivers the on-commit re-dispatch at once,
        # before the instant: it claims nothing. The broker's copy is the one that counts.
        parking.execution_park(
            execution=execution,
            agent=agent,
            until=until,
            detail="every candidate refused",
            now=clock.now(),
        )
        app.conf.task_always_eager = False
        try:
            with (
                app.connection_for_write(broker.url) as connection,
                app.producer_or_acquire(app.amqp.Producer(connection)) as producer,
            ):
                tasks.run_parked_turn.apply_async(
                    (str(execution.pk),), eta=until, producer=producer
                )
        finally:
            app.conf.task_always_eager = True
        wait_until(
            lambda: "execution.run_parked_turn" in (tmp_path / "parked-1.log").read_text(),
            seconds=30,
            what="the first worker to receive the re-dispatch",
        )
        assert clock.now() < until
        first.kill()  # holding it unacknowledged, waiting for its eta
        execution.refresh_from_db()
        assert execution.status == Status.PARKED and messages_sent(control) == []

        second.start()
        wait_until(
            lambda: "'ran'" in (tmp_path / "parked-2.log").read_text(),
            seconds=60,
            what="the next worker to run the parked turn",
        )
    finally:
        first.stop()
        second.stop()

    execution.refresh_from_db()
    assert execution.status == Status.SUCCEEDED, (execution.error_code, execution.error_detail)
    assert execution.dispatched_at is not None and execution.dispatched_at >= until
    assert messages_sent(control) == [("plan-a", 200)]  # once
