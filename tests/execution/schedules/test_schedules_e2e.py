"""A schedule end to end: beat's fire queues the turn, a worker (eager here) runs it on a
real agent server with the real Claude Code CLI against the simulator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from execution import tasks
from execution.models import Execution, Status, Trigger
from execution.schedules import services as schedules
from simulator.control import SimulatorControl
from tests.execution.support import agent_on, messages_sent, register_plan
from trinity import clock

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_due_schedule_runs_one_schedule_turn_on_the_agent(
    control: SimulatorControl, owner: User
) -> None:
    a, _ = register_plan(control, "plan-a")
    agent = agent_on(owner, a)
    now = clock.now()
    schedule = schedules.schedule_create(
        agent=agent, name="every-5", cron="*/5 * * * *", message="say hi", now=now
    )
    assert schedule.next_fire_at is not None
    due = schedule.next_fire_at

    # Two sweeps of the same minute (two beats): one turn.
    assert schedules.schedules_fire(now=due) == 1
    assert schedules.schedules_fire(now=due + timedelta(seconds=1)) == 0

    turn = Execution.objects.get()
    assert (turn.status, turn.trigger, turn.schedule_id) == (
        Status.SUCCEEDED,
        Trigger.SCHEDULE,
        schedule.pk,
    )
    assert turn.served_by_subscription_id == a.pk
    assert messages_sent(control) == [("plan-a", 200)]
    # The worker's task, redelivered, runs nothing again.
    assert tasks.run_turn(str(turn.pk)) == "not_queued"
    assert messages_sent(control) == [("plan-a", 200)]
