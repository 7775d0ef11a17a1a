"""A paused plan serves no turn: the REST API, a real agent server running the real
Claude Code CLI, the provider simulator and the real database. What each credential
was asked is read from the simulator's request log."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent, RoutingPolicy
from simulator.control import SimulatorControl
from subscriptions.models import Subscription
from tests.execution.support import agent_on, messages_sent, register_plan, task

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def pause(client: APIClient, plan: Subscription, paused: bool = True) -> None:
    response = client.patch(f"/api/subscriptions/{plan.pk}", {"paused": paused}, format="json")
    assert response.status_code == 200, response.content


def test_a_turn_of_an_agent_on_a_paused_plan_runs_on_the_next_plan_and_moves_it(
    control: SimulatorControl, owner: User, owner_client: APIClient, admin_client_api: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    pause(admin_client_api, a)

    explained = owner_client.get("/api/agents/bot/routing").json()
    body = task(owner_client)

    # The explainer says so before the turn, and the turn does what it said.
    assert explained["pre_dispatch"] == "paused"
    assert (explained["assigned"]["excluded"], explained["first"]["name"]) == ("paused", "plan-b")
    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-b", 200)]  # plan-a was never asked
    assert [(x["name"], x["why"]) for x in body["attempts"]] == [("plan-b", "pre_dispatch")]
    switch = body["subscription_switch"]
    assert switch["committed"] is True
    assert switch["explanation"].startswith("its subscription 'plan-a' is paused; ")
    assert Agent.objects.get(pk=agent.pk).subscription_id == b.pk


def test_a_walk_never_reaches_a_paused_plan_and_a_resumed_one_serves_again(
    control: SimulatorControl, owner: User, owner_client: APIClient, admin_client_api: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")  # first in load-balance order (by name)
    register_plan(control, "plan-c")
    agent_on(owner, a)
    pause(admin_client_api, b)
    control.set_usage(a_token, "five_hour", percent=100)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-a", 429), ("plan-c", 200)]

    pause(admin_client_api, b, paused=False)
    explained = owner_client.get("/api/agents/bot/routing").json()
    assert "plan-b" in [r["name"] for r in explained["rungs"]]


def test_a_pinned_agent_on_a_paused_plan_is_refused_and_nothing_is_sent(
    control: SimulatorControl, owner: User, owner_client: APIClient, admin_client_api: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    Agent.objects.filter(pk=agent.pk).update(routing_policy=RoutingPolicy.PINNED)
    pause(admin_client_api, a)

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert (body["error_code"], body["walk_stop"]) == ("billing", "paused")
    assert body["error_detail"].startswith("Agent 'bot': its subscription 'plan-a' is paused")
    assert messages_sent(control) == []
