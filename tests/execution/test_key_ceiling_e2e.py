"""The admin's fallback switch is a ceiling, end to end: the REST API, a real agent
server running the real Claude Code CLI, the provider simulator and the database.
Whether the key was asked is read from the simulator's request log."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from tests.agents.factories import AgentFactory
from tests.execution.support import agent_on, messages_sent, register_plan, task
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY_LABEL = "platform-key"


def key_configured(control: SimulatorControl) -> str:
    """A platform key with plenty of credit: it would serve if it were asked."""
    value = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(value, kind="api_key", label=KEY_LABEL, credit_usd=100)
    trinity_services.platform_api_key_set(key=value)
    return value


def key_requests(control: SimulatorControl) -> list[str]:
    return [r["path"] for r in control.requests() if r["credential"] == KEY_LABEL]


def fallback(admin: APIClient, *, enabled: bool) -> None:
    response = admin.put(
        "/api/subscriptions/settings/api-key-fallback", {"enabled": enabled}, format="json"
    )
    assert response.status_code == 200, response.json()


def test_with_the_fallback_off_an_agent_that_wants_the_key_never_reaches_it(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    """No plan at all: before, the agent's own ``use_platform_api_key`` booted it on the
    key and the turn was served there although the admin had turned the fallback off."""
    key_value = key_configured(control)
    fallback(admin_client_api, enabled=False)
    AgentFactory.create(name="bot", owner=owner, use_platform_api_key=True)

    body = task(owner_client)

    assert body["http_status"] != 200, body
    assert body["served_by_kind"] != "api_key"
    assert key_requests(control) == []
    assert key_value not in str(body)
    assert Agent.objects.get(name="bot").auth_mode == "none"


def test_with_the_fallback_off_a_refused_plan_does_not_fall_to_the_key(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    plan, plan_token = register_plan(control, "plan-a")
    agent = agent_on(owner, plan)
    Agent.objects.filter(pk=agent.pk).update(use_platform_api_key=True)
    key_configured(control)
    fallback(admin_client_api, enabled=False)
    control.set_usage(plan_token, "five_hour", percent=100)

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert messages_sent(control) == [("plan-a", 429)]
    assert key_requests(control) == []


def test_an_agent_booted_on_the_key_leaves_it_when_the_admin_turns_the_fallback_off(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    key_configured(control)
    AgentFactory.create(name="bot", owner=owner, use_platform_api_key=True)
    served = task(owner_client)
    assert (served["http_status"], served["served_by_kind"]) == (200, "api_key"), served
    assert Agent.objects.get(name="bot").auth_mode == "api_key"
    before = len(key_requests(control))

    fallback(admin_client_api, enabled=False)  # re-applies its credentials (eager Celery)
    body = task(owner_client)

    assert body["served_by_kind"] != "api_key", body
    assert len(key_requests(control)) == before
    assert Agent.objects.get(name="bot").auth_mode == "none"
