"""Codex plans serve turns end to end: the REST API, a real agent server running the
real Codex CLI through its forwarder, the provider simulator's ChatGPT backend and
sign-in service, and the real database. Which plan served each request is read from
the simulator's request log, not from our own records.

The plans' tokens carry the session canary's marker (the access token's signature
part, the refresh token), so a token that reached a response, a log line or a row
in plaintext fails the run (``tests/session_canary.py``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshot_read
from subscriptions.models import KeySpend, Subscription
from tests.agents.factories import AgentFactory
from tests.execution.support import (
    agent_on,
    register_codex_plan,
    register_plan,
    task,
)
from tests.session_canary import MARKER
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PLAN_PATH = "/backend-api/codex/responses"
MODEL = "gpt-5.5-codex"
CodexPlan = Callable[..., tuple[Subscription, str]]


@pytest.fixture
def codex_plan(control: SimulatorControl) -> CodexPlan:
    """A Codex plan as an operator registers it (``register_codex_plan``)."""

    def make(name: str, *, expires_in: float = 3600) -> tuple[Subscription, str]:
        return register_codex_plan(control, name, expires_in=expires_in)

    return make


def codex_agent(owner: User, plan: Subscription, name: str = "coder") -> Agent:
    agent = AgentFactory.create(name=name, owner=owner, runtime="codex-cli", model=MODEL)
    return subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)


def plan_requests(control: SimulatorControl) -> list[tuple[str | None, int]]:
    """(plan, status) of every turn request the ChatGPT backend saw, in order."""
    return [(r["credential"], r["status"]) for r in control.requests() if r["path"] == PLAN_PATH]


def exhaust(control: SimulatorControl, token: str) -> None:
    control.set_usage(token, "five_hour", percent=100)


def test_a_codex_agents_turn_is_served_on_its_codex_plan(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    plan, token = codex_plan("gpt-a")
    codex_agent(owner, plan)
    control.clear_requests()

    body = task(owner_client, agent="coder", message="say hi")

    assert body["http_status"] == 200, body
    assert body["response"] == "Simulated reply: say hi"
    assert body["served_by_kind"] == "subscription"
    assert body["served_by_subscription"] == {"id": plan.pk, "name": "gpt-a"}
    assert body["input_tokens"] > 0 and body["output_tokens"] > 0
    assert body["attempts"][0]["fingerprint"] == plan.token_fingerprint == token[-4:]
    assert plan_requests(control) == [("gpt-a", 200)]
    # Nothing reached the Anthropic side.
    assert not [r for r in control.requests() if r["path"].startswith("/v1/messages")]
    # The answer's x-codex-* headers are the plan's reading now.
    reading = snapshot_read(plan.pk).get(plan.pk)
    assert reading is not None and reading.source == "turn"
    assert set(reading.windows) == {"five_hour", "seven_day"}
    assert (reading.windows["five_hour"].utilization or 0) > 0


def test_a_refused_codex_turn_walks_to_the_next_codex_plan_and_commits_it_once(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = codex_plan("gpt-a")
    b, _ = codex_plan("gpt-b")
    agent = codex_agent(owner, a)
    exhaust(control, a_token)
    control.clear_requests()

    body = task(owner_client, agent="coder")

    assert body["http_status"] == 200, body
    assert plan_requests(control) == [("gpt-a", 429), ("gpt-b", 200)]
    assert [(x["name"], x["outcome"], x["why"]) for x in body["attempts"]] == [
        ("gpt-a", "refused", "assigned"),
        ("gpt-b", "served", "ranked"),
    ]
    assert body["attempts"][0]["error_code"] == "rate_limit"
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk
    assert Notification.objects.filter(kind="subscription_switched").count() == 1


def test_a_walk_onto_a_plan_whose_token_is_expiring_refreshes_it_first_once(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = codex_plan("gpt-a")
    b, b_token = codex_plan("gpt-b", expires_in=60)  # inside the refresh margin
    codex_agent(owner, a)
    exhaust(control, a_token)
    control.clear_requests()

    body = task(owner_client, agent="coder")

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"] == {"id": b.pk, "name": "gpt-b"}
    assert control.credential("gpt-b")["refreshes"] == 1
    assert control.credential("gpt-a")["refreshes"] == 0
    refreshed = [r for r in control.requests() if r["path"] == "/oauth/token"]
    assert [(r["credential"], r["status"]) for r in refreshed] == [("gpt-b", 200)]
    b.refresh_from_db()
    stored = json.loads(b.token.reveal())
    assert stored["access_token"] != b_token and stored["account_id"] == "acct-gpt-b"
    # The next turn on gpt-b needs no refresh: the rotated token holds.
    task(owner_client, agent="coder")
    assert control.credential("gpt-b")["refreshes"] == 1


def test_a_chat_session_resumes_on_the_plan_it_walked_to(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = codex_plan("gpt-a")
    codex_plan("gpt-b")
    codex_agent(owner, a)
    first = task(owner_client, agent="coder", message="first question", session_id="chat-1")
    assert first["http_status"] == 200, first
    exhaust(control, a_token)
    control.clear_requests()

    second = task(owner_client, agent="coder", message="second question", session_id="chat-1")

    assert second["http_status"] == 200, second
    assert second["response"] == "Simulated reply: second question"
    requests = [r for r in control.requests() if r["path"] == PLAN_PATH]
    assert [(r["credential"], r["status"]) for r in requests] == [("gpt-a", 429), ("gpt-b", 200)]
    # The resumed thread carried the first turn's question and answer to the new plan.
    assert requests[-1]["messages"] >= 4


def test_when_every_codex_plan_refuses_the_openai_key_serves_never_the_anthropic_one(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = codex_plan("gpt-a")
    _, b_token = codex_plan("gpt-b")
    agent = codex_agent(owner, a)
    openai = f"sk-proj-{MARKER}{secrets.token_hex(12)}"
    control.register(openai, kind="openai_key", label="openai-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=openai, provider="openai-codex")
    anthropic = f"sk-ant-api03-{secrets.token_hex(24)}"
    control.register(anthropic, kind="api_key", label="anthropic-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=anthropic)
    trinity_services.system_routing_settings_set(
        changes={"openai_key_budget_daily_usd": Decimal("5.00")}
    )
    exhaust(control, a_token)
    exhaust(control, b_token)
    control.clear_requests()
    # The explainer names this agent's rungs: its provider's plans, then its key.
    routing = owner_client.get("/api/agents/coder/routing").json()
    assert [(r["kind"], r["name"]) for r in routing["rungs"]] == [
        ("subscription", "gpt-a"),
        ("subscription", "gpt-b"),
        ("api_key", "OpenAI platform key"),  # the agent's provider's key, by name
    ]
    assert routing["key"]["available"] is True

    body = task(owner_client, agent="coder")

    assert body["http_status"] == 200, body
    assert body["served_by_kind"] == "api_key" and body["served_by_subscription"] is None
    assert body["attempts"][-1]["name"] == "OpenAI platform key"
    sent = [(r["path"], r["credential"], r["status"]) for r in control.requests()]
    assert sent[-1] == ("/v1/responses", "openai-key", 200)
    assert not [s for s in sent if s[1] == "anthropic-key" or s[0].startswith("/v1/messages")]
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk  # the key never becomes the assignment
    # The OpenAI key's spend is in its own fleet ledger, never the Anthropic key's.
    ledger = {row.scope: row.spent_usd for row in KeySpend.objects.filter(period="day")}
    assert ledger.get("fleet:openai-codex", Decimal(0)) > 0, ledger
    assert ledger.get("fleet", Decimal(0)) == 0


def test_a_codex_agent_never_walks_to_a_claude_plan_nor_a_claude_agent_to_a_codex_plan(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    codex, codex_token = codex_plan("gpt-a")
    claude, claude_token = register_plan(control, "max-a")
    codex_agent(owner, codex)
    agent_on(owner, claude, name="writer")
    exhaust(control, codex_token)
    exhaust(control, claude_token)
    control.clear_requests()

    refused_codex = task(owner_client, agent="coder")
    refused_claude = task(owner_client, agent="writer")

    # Each walk had nothing of its own provider left, and took nothing of the other's.
    assert refused_codex["status"] == "failed" and refused_claude["status"] == "failed"
    assert refused_codex["error_code"] == refused_claude["error_code"] == "billing"
    sent = [(r["path"], r["credential"], r["status"]) for r in control.requests()]
    turns = [s for s in sent if s[0] in (PLAN_PATH, "/v1/messages")]
    assert {s[1] for s in turns if s[0] == PLAN_PATH} == {"gpt-a"}
    assert {s[1] for s in turns if s[0] == "/v1/messages"} == {"max-a"}
    assert all(status == 429 for _, _, status in turns)


def test_a_streamed_codex_turn_shows_its_text_before_it_ends(
    codex_plan: CodexPlan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    from tests.execution.live_support import body_events, kinds

    plan, _ = codex_plan("gpt-a")
    codex_agent(owner, plan)
    control.set_stream_pause(400)  # a slow model: the answer ends well after its text
    response = owner_client.post(
        "/api/agents/coder/task", {"message": "say hi", "stream": True}, format="json"
    )

    events = list(body_events(response))

    assert kinds(events)[:2] == ["turn", "sent"] and kinds(events)[-2:] == ["served", "end"]
    text = next(e for e in events if e.kind == "text")
    assert "Simulated reply" in "".join(e.data["text"] for e in events if e.kind == "text")
    assert text.at < events[-1].at - 0.2, "the text came only with the end"
    assert events[-1].data["served_by"] == {"kind": "subscription", "name": "gpt-a"}
