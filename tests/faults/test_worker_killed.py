"""The Celery worker is SIGKILLed in the middle of an async turn (``acks_late``).

Real parts: a Celery worker process (prefork) on the test database with a broker of
this test's own (a throwaway Redis), the agent server with the real Claude Code CLI,
the simulator. The turn is in flight at the agent server when the worker dies; the
broker redelivers the task; the redelivered task must not dispatch the turn again
(the upstream's request log counts it), and the reaper fails the turn ``worker_lost``
once its deadline has passed, instead of re-running it blind.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from agents import lifecycle
from execution import services as execution_services
from execution import tasks
from execution.models import Execution, Status
from simulator.control import SimulatorControl
from tests.faults.harness import (
    CeleryWorker,
    RedisServer,
    agent_on,
    children_of,
    cli_child,
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

LATENCY_MS = 8_000  # the turn is at the upstream for this long
REDELIVERY_SECONDS = 60.0


@pytest.fixture
def broker() -> Iterator[RedisServer]:
    with throwaway_redis() as server:
        yield server


def worker_env(tmp_path: Path, broker: RedisServer) -> dict[str, str]:
    return platform_env(
        tmp_path,
        DATABASE_URL=shared_database_url(),
        REDIS_URL=broker.url,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=settings.TRINITY_ANTHROPIC_BASE_URL,
    )


def enqueue(broker: RedisServer, owner: User, control: SimulatorControl) -> Execution:
    """A queued turn on a running agent, published to the test's own broker."""
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    execution = execution_services.execution_create(
        agent=agent, message="say hi", trigger="api", timeout_seconds=60, queued=True
    )
    # The control fixture runs tasks eagerly (in this process); this one goes to the worker.
    app.conf.task_always_eager = False
    try:
        with (
            app.connection_for_write(broker.url) as connection,
            app.producer_or_acquire(app.amqp.Producer(connection)) as producer,
        ):
            tasks.run_turn.apply_async((str(execution.pk),), producer=producer)
    finally:
        app.conf.task_always_eager = True
    return execution


def at_the_upstream(control: SimulatorControl) -> None:
    """Wait until the upstream holds the turn's request: a CLI that has started may not
    have sent it yet (node starts slowly on a loaded machine), and a kill before it did
    would test a turn that never reached the provider."""
    wait_until(
        lambda: control.latency()["in_flight"] >= 1,
        seconds=60,
        what="the turn's request to reach the upstream",
    )


def assert_dispatched_once_then_reaped(control: SimulatorControl, execution: Execution) -> None:
    """The turn stays ``running`` (its outcome is unknown), reached the upstream once,
    and is failed ``worker_lost`` by the reaper only after its deadline."""
    execution.refresh_from_db()
    assert execution.status == Status.RUNNING
    control.set_latency(0)  # releases the held answer now rather than waiting it out
    wait_until(
        lambda: control.latency()["in_flight"] == 0,
        seconds=30,
        what="the held answer to be answered and recorded",
    )
    assert messages_sent(control) == [("plan-a", 200)]  # dispatched once, served once
    assert execution_services.executions_reap(now=clock.now()) == 0  # not before its deadline
    assert execution.deadline is not None
    assert execution_services.executions_reap(now=execution.deadline + timedelta(seconds=1)) == 1
    execution.refresh_from_db()
    assert (execution.status, execution.error_code) == (Status.FAILED, "worker_lost")
    assert messages_sent(control) == [("plan-a", 200)]  # and never re-run


def test_a_pool_process_killed_mid_turn_is_redelivered_and_never_dispatches_twice(
    broker: RedisServer, control: SimulatorControl, owner: User, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    worker = CeleryWorker(worker_env(tmp_path, broker), log_path=log, name="faults-a").start()
    try:
        control.clear_requests()
        control.set_latency(LATENCY_MS)
        execution = enqueue(broker, owner, control)
        agent = execution.agent
        assert agent is not None
        cli_child(agent, seconds=60)  # the worker dispatched it: the CLI is mid-turn
        at_the_upstream(control)
        assert worker.proc is not None
        pool = [pid for pid, cmdline in children_of(worker.proc.pid) if b"celery" in cmdline]
        assert len(pool) == 1
        os.kill(pool[0], signal.SIGKILL)  # the process running the turn (an OOM kill)

        # reject_on_worker_lost requeues the message; the new pool process claims
        # nothing, because the row is no longer queued.
        wait_until(
            lambda: "'not_queued'" in log.read_text(errors="replace"),
            seconds=REDELIVERY_SECONDS,
            what="the redelivered task to run",
        )
        assert_dispatched_once_then_reaped(control, execution)
    finally:
        control.set_latency(0)
        worker.stop()


def test_a_whole_worker_killed_mid_turn_is_redelivered_to_the_next_and_never_dispatches_twice(
    broker: RedisServer, control: SimulatorControl, owner: User, tmp_path: Path
) -> None:
    env = worker_env(tmp_path, broker)
    # The broker redelivers an unacknowledged message after its visibility timeout
    # (an hour by default; seconds here: tests/faults/worker_app.py).
    short = "tests.faults.worker_app"
    first = CeleryWorker(env, log_path=tmp_path / "first.log", name="faults-b1", app=short)
    second = CeleryWorker(env, log_path=tmp_path / "second.log", name="faults-b2", app=short)
    try:
        first.start()
        control.clear_requests()
        control.set_latency(LATENCY_MS)
        execution = enqueue(broker, owner, control)
        assert execution.agent is not None
        cli_child(execution.agent, seconds=60)
        at_the_upstream(control)
        first.kill()  # main process and pool at once: nothing acknowledges or rejects

        second.start()
        wait_until(
            lambda: "'not_queued'" in (tmp_path / "second.log").read_text(errors="replace"),
            seconds=REDELIVERY_SECONDS,
            what="the next worker to get the redelivered task",
        )
        assert_dispatched_once_then_reaped(control, execution)
    finally:
        control.set_latency(0)
        first.stop()
        second.stop()
