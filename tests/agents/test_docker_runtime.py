"""The docker runtime against a stand-in for the docker SDK.

No Docker engine runs on this machine, so the docker SDK client is MOCKED here, and
so is the health wait on the container's port (nothing listens there). What is
checked is what Trinity asks the docker SDK for: image, name, env, ports, network.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from unittest import mock

import docker.errors
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import CONTAINER_PORT, DockerRuntime
from trinity.crypto import Secret


class FakeContainers:
    """Records calls the way docker-py's ContainerCollection would receive them."""

    def __init__(self) -> None:
        self.run_kwargs: dict[str, Any] = {}
        self.by_id: dict[str, Any] = {}

    def run(self, **kwargs: Any) -> Any:
        self.run_kwargs = kwargs
        container = mock.MagicMock()
        container.id = "c0ffee"
        container.short_id = "c0ffee"
        container.status = "running"
        container.attrs = {
            "NetworkSettings": {"Ports": {f"{CONTAINER_PORT}/tcp": [{"HostPort": "49999"}]}}
        }
        self.by_id["c0ffee"] = container
        self.by_id[kwargs["name"]] = container
        return container

    def get(self, key: str) -> Any:
        if key not in self.by_id:
            raise docker.errors.NotFound("no such container")
        return self.by_id[key]


SPEC = SpawnSpec(
    name="bot",
    runtime="claude-code",
    model="claude-sonnet-4-5",
    secret=Secret("shared-secret-value-123456"),
    env={"ANTHROPIC_BASE_URL": "http://simulator:8100"},
    credentials={"CLAUDE_CODE_OAUTH_TOKEN": Secret("sk-ant-oat01-" + "d" * 30)},
)


@override_settings(TRINITY_AGENT_IMAGE="trinity-agent:test", TRINITY_DOCKER_NETWORK="")
def test_start_creates_a_container_from_the_agent_image_with_the_baseline_env() -> None:
    containers = FakeContainers()
    runtime = DockerRuntime(client_factory=lambda: SimpleNamespace(containers=containers))
    with mock.patch.object(DockerRuntime, "_wait_healthy") as wait:
        spawned = runtime.start(SPEC)
    wait.assert_called_once_with("http://127.0.0.1:49999", "bot")
    kwargs = containers.run_kwargs
    assert kwargs["image"] == "trinity-agent:test"
    assert kwargs["name"] == "trinity-agent-bot"
    assert kwargs["environment"]["CLAUDE_CODE_OAUTH_TOKEN"].startswith("sk-ant-oat01-")
    assert kwargs["environment"]["TRINITY_AGENT_SECRET"] == "shared-secret-value-123456"
    assert kwargs["ports"] == {f"{CONTAINER_PORT}/tcp": ("127.0.0.1", None)}
    assert spawned.handle == "c0ffee"
    assert runtime.is_alive(name="bot", handle="c0ffee")
    runtime.stop(name="bot", handle="c0ffee")
    containers.by_id["c0ffee"].stop.assert_called_once()
    containers.by_id["c0ffee"].remove.assert_called_once()


@override_settings(TRINITY_DOCKER_NETWORK="trinity")
def test_on_a_compose_network_the_endpoint_is_the_container_name() -> None:
    containers = FakeContainers()
    runtime = DockerRuntime(client_factory=lambda: SimpleNamespace(containers=containers))
    with mock.patch.object(DockerRuntime, "_wait_healthy"):
        spawned = runtime.start(SPEC)
    assert spawned.endpoint == f"http://trinity-agent-bot:{CONTAINER_PORT}"
    assert containers.run_kwargs["network"] == "trinity"
    assert "ports" not in containers.run_kwargs


def test_a_missing_container_is_not_alive_and_stopping_it_is_harmless() -> None:
    containers = FakeContainers()
    runtime = DockerRuntime(client_factory=lambda: SimpleNamespace(containers=containers))
    assert not runtime.is_alive(name="bot", handle="gone")
    runtime.stop(name="bot", handle="gone")


def test_the_spawn_spec_repr_hides_credentials() -> None:
    assert "sk-ant-oat01" not in repr(SPEC)
    assert "shared-secret-value" not in repr(SPEC)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_the_backend_setting_selects_the_runtime(backend: str) -> None:
    from agents.runtimes import get_runtime

    with override_settings(TRINITY_AGENT_BACKEND=backend):
        assert get_runtime().name == backend
