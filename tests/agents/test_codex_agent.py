"""A Codex agent: its provider, what it boots with, and how its credentials travel."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import RUNTIME_PROVIDER, AuthMode, Runtime
from routing.rung import Rung, RungKind
from subscriptions.codex_refresh import codex_wire_rung
from subscriptions.models import Provider
from subscriptions.services import subscription_register
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory
from tests.subscriptions.test_codex_credential import ACCESS, AUTH_JSON
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db


def test_every_runtime_names_a_known_provider() -> None:
    assert set(RUNTIME_PROVIDER) == set(Runtime.values)
    assert set(RUNTIME_PROVIDER.values()) == set(Provider.values)
    assert RUNTIME_PROVIDER[Runtime.CODEX_CLI] == Provider.OPENAI_CODEX


def test_an_agent_created_with_the_codex_runtime_spends_codex_plans(
    admin_client_api: APIClient,
) -> None:
    subscription_register(
        name="max-a", provider="anthropic", plan_type="max-20x", token="sk-ant-oat01-" + "a" * 40
    )
    codex, _ = subscription_register(
        name="gpt-pro", provider="openai-codex", plan_type="pro", token=AUTH_JSON
    )
    response = admin_client_api.post(
        "/api/agents", {"name": "coder", "runtime": "codex-cli"}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["runtime"] == "codex-cli"
    assert body["provider"] == "openai-codex"
    # Auto-assigned to the best plan of its provider: never the Claude plan.
    assert body["subscription"] == {"id": codex.pk, "name": "gpt-pro"}
    claude = admin_client_api.post("/api/agents", {"name": "writer"}, format="json").json()
    assert claude["provider"] == "anthropic" and claude["subscription"]["name"] == "max-a"


def test_a_codex_plan_never_boots_an_agent_and_every_turn_carries_it() -> None:
    plan, _ = subscription_register(
        name="gpt-pro", provider="openai-codex", plan_type="pro", token=AUTH_JSON
    )
    agent = AgentFactory.create(runtime="codex-cli", model="gpt-5.5-codex", subscription=plan)
    rung = lifecycle.baseline_rung(agent)
    assert rung is not None and rung.provider == "openai-codex" and rung.subscription_id == plan.pk
    assert not rung.boots and rung.env() == {}
    assert lifecycle.auth_mode(rung) == AuthMode.NONE
    _mode, spec = lifecycle.spawn_spec(agent)
    assert "rt-0123456789abcdef" not in json.dumps(spec.environment())
    assert ACCESS not in json.dumps(spec.environment())


def test_a_codex_plans_turn_carries_its_access_token_and_account_never_its_refresh_token(
    django_assert_num_queries: Any,
) -> None:
    plan, _ = subscription_register(
        name="gpt-pro", provider="openai-codex", plan_type="pro", token=AUTH_JSON
    )
    stored = Rung(RungKind.SUBSCRIPTION, plan.token, plan.pk, plan.name, plan.provider)
    # The access token in AUTH_JSON expires in 2030: no refresh is due, and the turn's
    # hot path reads nothing more than the rung it holds.
    with django_assert_num_queries(0):
        sent = codex_wire_rung(stored, now=datetime(2029, 6, 1, tzinfo=UTC))
        again = codex_wire_rung(sent, now=datetime(2029, 6, 1, tzinfo=UTC))
    wire = sent.wire()
    assert wire == {"oauth_token": ACCESS, "account_id": "acct-1"}
    assert again.wire() == wire  # a re-send on the same plan sends the same
    assert stored.echoed_by("oauth_token") and not stored.echoed_by("api_key")


def test_claude_rungs_travel_as_they_did() -> None:
    claude = SubscriptionFactory.create()
    rung = Rung(RungKind.SUBSCRIPTION, claude.token, claude.pk, claude.name, claude.provider)
    assert codex_wire_rung(rung, now=datetime(2029, 6, 1, tzinfo=UTC)) is rung
    assert list(rung.wire()) == ["oauth_token"]
    assert list(Rung(RungKind.API_KEY, Secret("sk-ant-api03-" + "k" * 40)).wire()) == ["api_key"]
    key = Rung(RungKind.API_KEY, Secret("sk-proj-" + "k" * 40), provider="openai-codex")
    assert list(key.wire()) == ["api_key"] and list(key.env()) == ["OPENAI_API_KEY"]


def test_a_runtime_change_that_would_strand_the_agents_plan_is_a_conflict(
    admin_client_api: APIClient,
) -> None:
    agent = AgentFactory.create(name="writer", subscription=SubscriptionFactory.create())
    response = admin_client_api.patch("/api/agents/writer", {"runtime": "codex-cli"}, format="json")
    assert response.status_code == 409, response.content
    assert "Unassign it first" in response.json()["runtime"][0]
    agent.refresh_from_db()
    assert agent.runtime == "claude-code"
    # Within a provider, or unassigned, the runtime changes.
    assert (
        admin_client_api.patch(
            "/api/agents/writer", {"runtime": "anthropic-api"}, format="json"
        ).status_code
        == 200
    )
    agent.subscription = None
    agent.save(update_fields=["subscription"])
    assert (
        admin_client_api.patch(
            "/api/agents/writer", {"runtime": "codex-cli"}, format="json"
        ).status_code
        == 200
    )


def test_the_docker_backend_takes_every_runtime_and_refuses_an_unknown_one_unstarted() -> None:
    """The docker backend starts every runtime (a Codex agent's turn in its container:
    tests/docker/test_codex_agent_container_e2e.py); anything else is refused before
    any container exists."""
    from agents.runtimes.base import SpawnSpec
    from agents.runtimes.docker import IMAGE_RUNTIMES, DockerRuntime

    def no_engine() -> None:
        raise AssertionError("the engine was called")

    assert set(Runtime.values) == IMAGE_RUNTIMES
    spec = SpawnSpec(name="coder", runtime="nonesuch", model="", secret=Secret("s" * 32))
    with pytest.raises(RuntimeError, match="no nonesuch runtime yet.*TRINITY_AGENT_BACKEND=local"):
        DockerRuntime(client_factory=no_engine).start(spec)
