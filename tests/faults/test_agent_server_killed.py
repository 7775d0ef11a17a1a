"""The agent server is SIGKILLed in the middle of a turn.

Real parts: the agent server the platform spawned (the real Claude Code CLI inside),
the simulator, the test database. The upstream is slowed so the turn is in flight at
the agent server when its whole process group is killed.
"""

from __future__ import annotations

import os
import signal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import lifecycle
from agents.runtimes import get_runtime
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.faults.harness import (
    agent_on,
    alive,
    cli_child,
    messages_sent,
    register_plan,
    task,
    turn_in_background,
)
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_killed_agent_server_fails_the_turn_switches_nothing_and_is_revived(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")  # a walk would have somewhere to go
    agent = agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200  # the server is up
    agent.refresh_from_db()
    killed_server = int(agent.process_handle)
    control.clear_requests()
    control.set_latency(30_000)  # the upstream is slow: the turn is mid-flight

    thread, body = turn_in_background(owner_client)
    cli = cli_child(agent)
    os.killpg(killed_server, signal.SIGKILL)
    thread.join(timeout=60)
    control.set_latency(0)

    assert not thread.is_alive()
    assert body["status"] == "failed", body
    assert body["error_code"] in ("container_fault", "runtime_killed"), body
    assert body["http_status"] in (500, 503)
    # Nothing switched, nothing was blamed, nobody was told of a switch.
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk and not agent.last_switch
    assert not RateLimitEvent.objects.exists()
    assert not Notification.objects.filter(kind="subscription_switched").exists()
    assert [c for c, _ in messages_sent(control)] in ([], ["plan-a"])
    # The CLI died with its server (it would otherwise go on spending quota unread).
    assert not alive(cli)

    # The supervisor (the beat task agents.supervise) finds the row running and the
    # server gone, and starts a new one; the next turn is served on the same plan.
    assert lifecycle.agents_supervise() == ["bot"]
    agent.refresh_from_db()
    assert int(agent.process_handle) != killed_server
    assert get_runtime().is_alive(name=agent.name, handle=agent.process_handle)
    control.clear_requests()
    again = task(owner_client)
    assert again["http_status"] == 200, again
    assert again["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}
    assert messages_sent(control) == [("plan-a", 200)]
