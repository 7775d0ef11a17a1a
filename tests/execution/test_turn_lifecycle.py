"""A turn's life around the walk: async turns in a worker, deadlines that no row can
outlive, the failure path that always finishes the row, and a first turn on an agent
that is still starting. Real agent server, real CLI, simulator, real database."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from execution import services, tasks
from execution.models import Execution, Status
from routing.planner import lookups as planner_lookups
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.execution.support import wait_until
from tests.subscriptions.factories import plan_token
from trinity import clock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bot(control: SimulatorControl, owner: User) -> Agent:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-a")
    subscription, _ = subscription_services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=token
    )
    agent = AgentFactory.create(name="bot", owner=owner)
    return subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)


def messages_sent(control: SimulatorControl) -> int:
    return sum(1 for r in control.requests() if r["path"] == "/v1/messages" and r["stream"])


@pytest.mark.e2e
def test_an_async_turn_answers_202_and_runs_in_a_worker_once(
    bot: Agent, control: SimulatorControl, owner_client: APIClient
) -> None:
    response = owner_client.post(
        "/api/agents/bot/task",
        {"message": "say hi", "async": True, "trigger": "schedule"},
        format="json",
    )
    assert response.status_code == 202, response.content
    execution_id = response.json()["execution_id"]
    # The worker (eager here) ran it after the commit.
    execution = Execution.objects.get(pk=execution_id)
    assert (execution.status, execution.trigger) == (Status.SUCCEEDED, "schedule")
    assert execution.autonomous
    sent = messages_sent(control)
    assert sent == 1
    # A redelivered task for a finished turn does nothing: it is never dispatched twice.
    assert tasks.run_turn(execution_id) == "not_queued"
    assert messages_sent(control) == sent
    detail = owner_client.get(f"/api/executions/{execution_id}").json()
    assert detail["status"] == "succeeded" and detail["served_by_subscription"]["name"] == "plan-a"


def test_an_autonomous_trigger_needs_async_and_nothing_is_written(
    owner: User, owner_client: APIClient
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    response = owner_client.post(
        "/api/agents/bot/task", {"message": "x", "trigger": "schedule"}, format="json"
    )
    assert response.status_code == 400 and "trigger" in response.json()
    bad = owner_client.post(
        "/api/agents/bot/task", {"message": "x", "async": True, "trigger": "public"}, format="json"
    )
    assert bad.status_code == 400
    assert not Execution.objects.exists()


def test_the_largest_accepted_timeout_fits_the_server(
    owner: User, owner_client: APIClient, settings: object
) -> None:
    from django.conf import settings as django_settings

    AgentFactory.create(name="bot", owner=owner)
    too_long = django_settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS + 1
    response = owner_client.post(
        "/api/agents/bot/task", {"message": "x", "timeout_seconds": too_long}, format="json"
    )
    assert response.status_code == 400 and "timeout_seconds" in response.json()
    assert not Execution.objects.exists()


def test_a_row_left_running_past_its_deadline_is_failed_worker_lost(owner: User) -> None:
    agent = AgentFactory.create(name="bot", owner=owner)
    start = clock.now()
    with time_machine.travel(start, tick=False):
        lost = services.execution_create(
            agent=agent, message="x", trigger="api", timeout_seconds=60
        )
        queued = services.execution_create(
            agent=agent, message="y", trigger="schedule", timeout_seconds=60, queued=True
        )
        alive = services.execution_create(
            agent=agent, message="z", trigger="api", timeout_seconds=600
        )
    assert lost.deadline is not None
    with time_machine.travel(lost.deadline, tick=False):
        assert tasks.reap_lost_turns() == 0  # exactly at the deadline: not yet
    with time_machine.travel(lost.deadline + timedelta(seconds=1), tick=False):
        assert tasks.reap_lost_turns() == 2
    for row in (lost, queued):
        row.refresh_from_db()
        assert (row.status, row.error_code) == (Status.FAILED, "worker_lost")
    alive.refresh_from_db()
    assert alive.status == Status.RUNNING
    # The beat schedule runs the reaper.
    from trinity.celery import app

    assert app.conf.beat_schedule["reap-lost-turns"]["task"] == "execution.reap_lost_turns"


@pytest.mark.e2e
def test_a_bug_in_the_loop_still_finishes_the_row_and_logs_its_traceback(
    bot: Agent,
    control: SimulatorControl,
    owner_client: APIClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Fault injection: a bug in our own code after the attempt came back.
    def broken(**_: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(planner_lookups, "classify_attempt_refusal", broken)
    sub_token = subscription_services.Subscription.objects.get(name="plan-a").token.reveal()
    control.set_usage(sub_token, "five_hour", percent=100)  # a refusal reaches the bug

    response = owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")

    assert response.status_code == 503
    execution = Execution.objects.get()
    assert (execution.status, execution.error_code) == (Status.FAILED, "container_fault")
    assert execution.finished_at is not None
    assert "ZeroDivisionError" in caplog.text  # the traceback is in the log
    assert "ZeroDivisionError" not in execution.error_detail


@pytest.mark.e2e
def test_a_first_turn_waits_for_the_start_another_process_is_running(
    bot: Agent, control: SimulatorControl, owner_client: APIClient
) -> None:
    def start_elsewhere() -> None:
        from django.db import connection

        try:
            lifecycle.agent_start(agent=Agent.objects.get(pk=bot.pk))
        finally:
            connection.close()  # this thread's own connection

    starter = threading.Thread(target=start_elsewhere)
    starter.start()
    # The other start holds its marker, as a worker starting the agent does.
    wait_until(
        lambda: cache.get(f"marker:agent-start:{bot.pk}"),
        seconds=10,
        what="the other start's marker",
    )
    assert Agent.objects.get(pk=bot.pk).endpoint == ""  # not up yet

    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")
    starter.join(timeout=60)

    assert response.status_code == 200, response.content
    assert messages_sent(control) == 1
