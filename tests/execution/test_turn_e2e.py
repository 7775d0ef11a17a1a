"""A turn through the REST API, end to end: real agent server, real Claude Code CLI,
the simulator upstream, the real database. Refusals are recorded against the
credential that was sent; only quota and credential refusals count."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from execution.models import Execution
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import FailureKind, RateLimitEvent
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def planned_agent(control: SimulatorControl, owner: User) -> tuple[Agent, str]:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-a")
    subscription, _ = subscription_services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=token
    )
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)
    return agent, token


def _messages(control: SimulatorControl) -> list[str | None]:
    return [r["credential"] for r in control.requests() if r["path"].startswith("/v1/messages")]


def test_a_served_turn_records_its_credential_usage_and_answer(
    planned_agent: tuple[Agent, str], control: SimulatorControl, owner_client: APIClient
) -> None:
    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "succeeded"
    assert body["served_by_kind"] == "subscription"
    assert body["served_by_subscription"]["name"] == "plan-a"
    assert body["response"]
    assert body["input_tokens"] > 0 and body["output_tokens"] > 0
    assert body["attempts"][0]["override_echo"] == "oauth_token"
    assert set(_messages(control)) == {"plan-a"}
    listed = owner_client.get("/api/executions?agent=bot").json()["results"]
    assert [e["id"] for e in listed] == [body["id"]]


def test_a_usage_limit_is_recorded_against_the_subscription_that_was_sent(
    planned_agent: tuple[Agent, str], control: SimulatorControl, owner_client: APIClient
) -> None:
    agent, token = planned_agent
    control.set_usage(token, "five_hour", percent=100)
    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")
    assert response.status_code == 429
    body = response.json()
    assert (body["status"], body["error_code"]) == ("failed", "billing")
    assert body["earliest_reset"] is not None
    assert body["error_detail"] == "Tried: plan-a (rate limit); every candidate refused."
    event = RateLimitEvent.objects.get()
    assert event.failure_kind == FailureKind.RATE_LIMIT
    assert event.subscription_id == agent.subscription_id
    assert event.agent_name == "bot"


def test_a_revoked_token_is_an_auth_refusal(
    planned_agent: tuple[Agent, str], control: SimulatorControl, owner_client: APIClient
) -> None:
    _, token = planned_agent
    control.revoke(token)
    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")
    assert response.status_code == 503
    assert response.json()["error_code"] == "auth"
    assert RateLimitEvent.objects.get().failure_kind == FailureKind.AUTH
    assert token not in response.content.decode()


def test_a_model_rejection_records_no_refusal(
    planned_agent: tuple[Agent, str], owner_client: APIClient
) -> None:
    response = owner_client.post(
        "/api/agents/bot/task", {"message": "hi", "model": "claude-nope-9"}, format="json"
    )
    assert response.status_code == 422
    assert response.json()["error_code"] == "model_unsupported"
    assert not RateLimitEvent.objects.exists()


def test_an_agent_without_a_subscription_runs_on_the_platform_key(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key)
    AgentFactory.create(name="bot", owner=owner)
    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["served_by_kind"] == "api_key"
    assert response.json()["served_by_subscription"] is None
    assert set(_messages(control)) == {"platform-key"}


def test_task_permissions_and_bad_input(
    planned_agent: tuple[Agent, str], other_client: APIClient, owner_client: APIClient
) -> None:
    assert (
        other_client.post("/api/agents/bot/task", {"message": "x"}, format="json").status_code
        == 404
    )
    assert owner_client.post("/api/agents/bot/task", {}, format="json").status_code == 400
    bad = owner_client.post(
        "/api/agents/bot/task", {"message": "x", "timeout_seconds": 1}, format="json"
    )
    assert bad.status_code == 400 and "timeout_seconds" in bad.json()
    assert not Execution.objects.exists()
    assert owner_client.get("/api/executions?status=weird").status_code == 400


def test_a_served_turn_on_its_own_plan_costs_four_sql_statements(
    planned_agent: tuple[Agent, str], owner: User, owner_client: APIClient
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.selectors import agent_get_visible
    from execution import services

    # The first turn starts the agent's server; the second is the steady state.
    first = owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")
    assert first.status_code == 200, first.content
    agent = agent_get_visible(user=owner, name="bot")  # what the view loads (one SELECT)

    with CaptureQueriesContext(connection) as queries:
        execution = services.execution_run(agent=agent, message="hi", trigger="api")

    assert execution.status == "succeeded"
    verbs = [q["sql"].split(None, 1)[0] for q in queries.captured_queries]
    # The row, the admission count, the served row, its events (one INSERT, no
    # transaction): the planner read the breaker and the assignment's evidence from the
    # cache, and nothing else.
    assert verbs == ["INSERT", "SELECT", "UPDATE", "INSERT"], verbs
    kinds = [e.kind for e in execution.events.all()]
    platform = [k for k in kinds if k not in ("text", "tool_call", "tool_result")]
    assert platform == ["turn", "sent", "served", "end"] and "text" in kinds, kinds
