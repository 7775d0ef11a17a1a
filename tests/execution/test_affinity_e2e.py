"""Session affinity end to end: a chat session stays on the plan that served its
previous turn while that plan is eligible, with the real CLI, a real agent server and
the simulator (whose request log says which credential each request ran on)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent, RoutingPolicy
from execution.models import Execution
from simulator.control import SimulatorControl
from subscriptions.services import assignment_commit
from tests.execution.support import agent_on, messages_sent, register_plan, task
from trinity import clock
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def chat(client: APIClient, message: str, session_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    response = client.post("/api/agents/bot/chat", body, format="json")
    data: dict[str, Any] = response.json()
    data["http_status"] = response.status_code
    return data


def move_assignment(agent: Agent, *, origin: int, to: int, to_name: str) -> None:
    """What a concurrent turn's served walk commits: the assignment moves to ``to``."""
    assert assignment_commit(
        agent=agent,
        expected_subscription_id=origin,
        expected_subscription_name="plan-a",
        subscription_id=to,
        subscription_name=to_name,
        why={"why": "ranked", "refused": "plan-a refused"},
        now=clock.now(),
    )


def test_a_session_stays_on_its_plan_after_a_concurrent_turn_moved_the_assignment(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    first = chat(owner_client, "remember: teal")
    assert first["http_status"] == 200, first
    session_id = first["session_id"]
    assert first["served_by_subscription"]["name"] == "plan-a"
    move_assignment(agent, origin=a.pk, to=b.pk, to_name="plan-b")
    switches = Notification.objects.filter(kind="subscription_switched").count()
    control.clear_requests()

    second = chat(owner_client, "what colour?", session_id)

    assert second["http_status"] == 200, second
    assert second["session_id"] == session_id
    assert messages_sent(control) == [("plan-a", 200)]  # its warm cache, not the assignment
    assert second["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}
    assert [(x["name"], x["why"]) for x in second["attempts"]] == [("plan-a", "affinity")]
    # Served by affinity: no switch committed, the assignment stays where it was moved.
    assert second["subscription_switch"] is None
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk
    assert Notification.objects.filter(kind="subscription_switched").count() == switches

    # A turn without a session runs on the assignment as usual.
    control.clear_requests()
    assert task(owner_client)["http_status"] == 200
    assert messages_sent(control) == [("plan-b", 200)]

    # A refusal moves the session: to the assignment, which then serves it.
    control.set_usage(a_token, "five_hour", percent=100)
    control.clear_requests()
    third = chat(owner_client, "and now?", session_id)
    assert third["http_status"] == 200, third
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 200)]
    assert [(x["name"], x["outcome"], x["why"]) for x in third["attempts"]] == [
        ("plan-a", "refused", "affinity"),
        ("plan-b", "served", "assigned"),
    ]
    assert third["subscription_switch"] is None
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk

    # The session's plan is now plan-b, its assignment: the next turn goes straight there.
    control.clear_requests()
    fourth = chat(owner_client, "still there?", session_id)
    assert fourth["http_status"] == 200, fourth
    assert messages_sent(control) == [("plan-b", 200)]
    assert Execution.objects.filter(session_id=session_id).count() == 4


def test_a_pinned_agents_session_follows_its_assignment(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    Agent.objects.filter(pk=agent.pk).update(routing_policy=RoutingPolicy.PINNED)
    first = chat(owner_client, "remember: teal")
    assert first["http_status"] == 200, first
    move_assignment(agent, origin=a.pk, to=b.pk, to_name="plan-b")
    control.clear_requests()

    second = chat(owner_client, "what colour?", first["session_id"])

    assert second["http_status"] == 200, second
    assert messages_sent(control) == [("plan-b", 200)]
    assert second["attempts"][0]["why"] == "assigned"
