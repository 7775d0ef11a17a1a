"""Cancelling a turn that is not in a CLI: a parked one before it runs again, and a
running one between its steps (``execution/live/cancel.py``). The cancel of a turn
in its CLI is pinned end to end in test_live_turns_e2e.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from agents.models import Agent
from execution import services
from execution.live.cancel import execution_cancel
from execution.models import Execution, ExecutionEvent, Status
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory
from trinity import clock
from trinity.errors import Finished

pytestmark = pytest.mark.django_db


def _agent(owner: User) -> Agent:
    plan = SubscriptionFactory.create(name="plan-a")
    agent = AgentFactory.create(name="bot", owner=owner)
    return subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)


def _kinds(execution: Execution) -> list[str]:
    return list(
        ExecutionEvent.objects.filter(execution=execution)
        .order_by("seq")
        .values_list("kind", flat=True)
    )


def test_a_parked_turn_is_cancelled_before_it_runs_again(owner: User) -> None:
    agent = _agent(owner)
    now = clock.now()
    parked = services.execution_create(agent=agent, message="later", trigger="schedule")
    Execution.objects.filter(pk=parked.pk).update(
        status=Status.PARKED, parked_until=now - timedelta(seconds=1)
    )
    parked.refresh_from_db()

    cancelled = execution_cancel(execution=parked, now=now)

    assert (cancelled.status, cancelled.error_code) == (Status.CANCELLED, "cancelled")
    assert services.execution_run_parked(execution_id=str(parked.pk), now=now) == "not_due"
    assert _kinds(parked) == ["turn", "end"]
    with pytest.raises(Finished):
        execution_cancel(execution=cancelled, now=now)


def test_a_running_turn_marked_cancelled_sends_nothing_more(owner: User) -> None:
    agent = _agent(owner)
    running = services.execution_create(agent=agent, message="x", trigger="api")

    # Its agent has no server yet: the mark alone stops it at its next step.
    marked = execution_cancel(execution=running, now=clock.now())
    assert marked.status == Status.RUNNING and marked.cancel_requested_at is not None
    finished = services.execution_dispatch(execution=running, agent=agent)

    assert (finished.status, finished.error_code) == (Status.CANCELLED, "cancelled")
    assert finished.attempts == [] and finished.subscription_switch is None
    assert Agent.objects.get(pk=agent.pk).subscription_id == agent.subscription_id
    assert _kinds(finished) == ["turn", "end"]
