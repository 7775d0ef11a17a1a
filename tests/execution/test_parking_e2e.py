"""A parked turn end to end: the REST API, a real agent server running the real Claude
Code CLI, the provider simulator (its clock moved past the reset) and the database.
What ran is read from the simulator's request log."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.contrib.auth.models import User
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from agents.models import WaitPolicy
from execution import tasks
from execution.models import Execution, Status
from simulator.control import SimulatorControl
from tests.execution.support import agent_on, messages_sent, register_plan
from trinity import clock
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIVE_HOURS = timedelta(hours=5)
# The simulator's window starts at the turn's first request, a moment after ``start``,
# and the CLI names its reset to the minute: the parked instant is within a minute of
# ``start`` + 5 h, on either side.
MINUTE = timedelta(minutes=1)


def turns_counted(outcome: str) -> float:
    """Every finished turn with ``outcome`` the metrics counted, whatever its labels."""
    return sum(
        sample.value
        for family in REGISTRY.collect()
        if family.name == "trinity_turns"
        for sample in family.samples
        if sample.name == "trinity_turns_total" and sample.labels["outcome"] == outcome
    )


def scheduled_turn(client: APIClient) -> str:
    response = client.post(
        "/api/agents/bot/task",
        {"message": "say hi", "async": True, "trigger": "schedule"},
        format="json",
    )
    assert response.status_code == 202, response.content
    return str(response.json()["execution_id"])


def test_an_exhausted_scheduled_turn_parks_until_the_reset_and_then_runs_exactly_once(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    start = clock.now()
    control.set_clock(start)  # the windows' resets are 5 h after this instant
    a, a_token = register_plan(control, "plan-a")
    _, b_token = register_plan(control, "plan-b")
    agent_on(owner, a)
    control.set_usage(a_token, "five_hour", percent=100)
    control.set_usage(b_token, "five_hour", percent=100)

    failed_before = turns_counted("failed")
    # The worker (eager here) runs it; the re-dispatch it parks with arrives at once,
    # before its instant, and claims nothing.
    execution_id = scheduled_turn(owner_client)

    body = owner_client.get(f"/api/executions/{execution_id}").json()
    assert body["status"] == "parked", body
    parked_until = datetime.fromisoformat(body["parked_until"].replace("Z", "+00:00"))
    assert start + FIVE_HOURS - MINUTE <= parked_until <= start + FIVE_HOURS + MINUTE
    assert body["error_code"] == "" and body["finished_at"] is None
    assert "every candidate refused" in body["error_detail"]
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 429)]
    notice = Notification.objects.get(kind="turn_parked")
    assert parked_until.strftime("%Y-%m-%d %H:%M") in notice.title
    assert not Notification.objects.filter(kind="pool_exhausted").exists()
    assert turns_counted("failed") == failed_before  # parked is not finished
    # The reaper leaves it alone however long it waits.
    with time_machine.travel(parked_until - timedelta(seconds=1), tick=False):
        assert tasks.reap_lost_turns() == 0
        assert tasks.run_parked_turn(execution_id) == "not_due"

    control.clear_requests()
    succeeded_before = turns_counted("succeeded")
    control.advance_clock((parked_until - start).total_seconds() + 60)
    with time_machine.travel(parked_until + timedelta(seconds=60), tick=True):
        assert tasks.run_parked_turn(execution_id) == "ran"
        # A duplicate delivery (the broker's eta message and the beat sweep) claims nothing.
        assert tasks.run_parked_turn(execution_id) == "not_due"
        assert tasks.resend_parked_turns() == 0

    execution = Execution.objects.get(pk=execution_id)
    assert execution.status == Status.SUCCEEDED, (execution.error_code, execution.error_detail)
    assert execution.served_by_subscription_id == a.pk
    assert messages_sent(control) == [("plan-a", 200)]
    assert execution.deadline is not None and execution.deadline > parked_until
    assert turns_counted("succeeded") == succeeded_before + 1


def test_with_the_fail_policy_an_exhausted_scheduled_turn_fails_with_the_reset(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    control.set_clock(clock.now())
    a, a_token = register_plan(control, "plan-a")
    agent = agent_on(owner, a)
    agent.wait_policy = WaitPolicy.FAIL
    agent.save(update_fields=["wait_policy"])
    control.set_usage(a_token, "five_hour", percent=100)

    execution_id = scheduled_turn(owner_client)

    execution = Execution.objects.get(pk=execution_id)
    assert (execution.status, execution.error_code) == (Status.FAILED, "billing")
    assert execution.parked_until is None and execution.resets_at is not None
    assert not Notification.objects.filter(kind="turn_parked").exists()


def test_a_scheduled_turn_whose_key_budget_is_closed_parks_for_the_plans_reset(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    start = clock.now()
    control.set_clock(start)
    a, a_token = register_plan(control, "plan-a")
    agent = agent_on(owner, a)
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key)
    agent.key_budget_daily_usd = Decimal("0")  # closed: the key rung is out of the walk
    agent.save(update_fields=["key_budget_daily_usd"])
    control.set_usage(a_token, "five_hour", percent=100)

    execution_id = scheduled_turn(owner_client)

    execution = Execution.objects.get(pk=execution_id)
    assert (execution.status, execution.walk_stop) == (Status.PARKED, "key_budget")
    # The earlier of the plan's reset and the day's budget reopening (next midnight UTC).
    midnight = datetime.combine(start.date() + timedelta(days=1), time(), tzinfo=UTC)
    assert execution.parked_until is not None
    assert execution.parked_until <= min(start + FIVE_HOURS + MINUTE, midnight)
    assert execution.parked_until > start
    assert messages_sent(control) == [("plan-a", 429)]  # never the key
