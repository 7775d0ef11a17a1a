"""Per-agent allowed CLI tools: written through the agents API by the owner or an
admin, validated, and carried to the agent server at spawn as a TRINITY_* variable
that becomes the CLI's ``--allowedTools``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from agent_server.config import load_config
from agent_server.envlayer import layer_env
from agent_server.runtimes.base import Turn
from agent_server.runtimes.claude_code import ClaudeCodeRuntime
from agents import lifecycle
from agents.models import Agent
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db

URL = "/api/agents"


def test_a_new_agent_allows_no_tool_beyond_the_clis_default(owner_client: APIClient) -> None:
    response = owner_client.post(URL, {"name": "bot", "auto_assign": False}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["allowed_tools"] == []
    assert Agent.objects.get(name="bot").allowed_tools == []


def test_the_owner_and_an_admin_set_allowed_tools_another_user_cannot(
    owner_client: APIClient, other_client: APIClient, admin_client_api: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    denied = other_client.patch(f"{URL}/bot", {"allowed_tools": ["Bash"]}, format="json")
    assert denied.status_code == 404
    assert Agent.objects.get(name="bot").allowed_tools == []

    response = owner_client.patch(f"{URL}/bot", {"allowed_tools": ["Read"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["allowed_tools"] == ["Read"]
    response = admin_client_api.patch(
        f"{URL}/bot", {"allowed_tools": ["Read", "Bash"]}, format="json"
    )
    assert response.json()["allowed_tools"] == ["Read", "Bash"]
    assert Agent.objects.get(name="bot").allowed_tools == ["Read", "Bash"]


@pytest.mark.parametrize(
    "value",
    ["Read", ["Sudo"], ["Bash(rm:*)"], ["Read", "Read"], [""], [{"name": "Read"}]],
    ids=["a string", "unknown", "a rule", "twice", "empty name", "an object"],
)
def test_an_invalid_tool_list_is_a_400_naming_the_field_and_changes_nothing(
    owner_client: APIClient, owner: Any, value: object
) -> None:
    AgentFactory.create(name="bot", owner=owner, allowed_tools=["Read"])
    response = owner_client.patch(f"{URL}/bot", {"allowed_tools": value}, format="json")
    assert response.status_code == 400
    assert "allowed_tools" in response.json()
    assert Agent.objects.get(name="bot").allowed_tools == ["Read"]


@pytest.mark.parametrize(
    "change", [{"allowed_tools": ["Read"]}, {"placement": {"trinity.pool": "gpu-less"}}]
)
def test_changing_what_the_server_boots_with_restarts_the_agent_once_committed(
    owner_client: APIClient,
    owner: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    change: dict[str, Any],
) -> None:
    """The CLI's tools and the node labels it must run on are fixed when its server
    starts: a change restarts it (agents/services.py BOOT_FIELDS)."""
    from agents import tasks

    agent = AgentFactory.create(name="bot", owner=owner)
    restarted: list[int] = []
    monkeypatch.setattr(tasks.restart, "delay", restarted.append)
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.patch(f"{URL}/bot", change, format="json")
    assert response.status_code == 200, response.content
    assert restarted == [agent.pk]


def test_the_spawn_environment_carries_the_tools_to_the_clis_command_line(
    owner: Any, tmp_path: Path
) -> None:
    # The contract across both sides: the variable the platform sets at spawn is the
    # one the agent server reads, and it reaches the CLI's argv.
    agent = AgentFactory.create(name="bot", owner=owner, allowed_tools=["Read", "Bash"])
    _, spec = lifecycle.spawn_spec(agent)
    environ = {**spec.environment(), "TRINITY_AGENT_HOME": str(tmp_path)}
    config = load_config(environ)
    assert config.allowed_tools == ("Read", "Bash")
    runtime = ClaudeCodeRuntime(
        binary="claude", clock=lambda: datetime.now(UTC), allowed_tools=config.allowed_tools
    )
    turn = Turn(
        execution_id="e-1",
        message="hi",
        model=None,
        timeout_seconds=10.0,
        home=tmp_path,
        cwd=tmp_path,
    )
    argv = runtime.argv(turn, {})
    assert argv[argv.index("--allowedTools") + 1] == "Read,Bash"


def test_an_agents_dotenv_cannot_widen_its_allowed_tools(tmp_path: Path) -> None:
    spawn = layer_env(
        baseline={"TRINITY_AGENT_ALLOWED_TOOLS": "Read"},
        dotenv={"TRINITY_AGENT_ALLOWED_TOOLS": "Read,Bash,Write"},
        runtime_overrides={},
        extra={},
        drop=(),
        home=str(tmp_path),
    )
    assert spawn["TRINITY_AGENT_ALLOWED_TOOLS"] == "Read"


def test_an_agent_without_tools_spawns_the_cli_without_the_flag(owner: Any, tmp_path: Path) -> None:
    _, spec = lifecycle.spawn_spec(AgentFactory.create(name="bot", owner=owner))
    config = load_config({**spec.environment(), "TRINITY_AGENT_HOME": str(tmp_path)})
    assert config.allowed_tools == ()
