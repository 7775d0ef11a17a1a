"""The docker runtime against a stand-in for the docker SDK.

No Docker engine runs on this machine, so the docker SDK client is MOCKED here, and
so is the proof wait on the container's port (nothing listens there), except where a
stand-in server on loopback plays what answers on the published port. What is
checked is what Trinity asks the docker SDK for: image, name, env, ports, network,
and which containers a start or a delete may remove. The stand-in keeps the one
engine rule those depend on: a container name is unique, and creating a second
container with a taken name fails with 409 Conflict.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import docker.errors
import pytest
import requests
from django.test import override_settings

from agents.runtimes.base import SpawnSpec, StartConflict
from agents.runtimes.docker import CONTAINER_PORT, LABEL, START_LABEL, DockerRuntime
from tests.agents.standin import SECRET as PROOF_SECRET
from tests.agents.standin import StandIn, close, serve
from trinity.crypto import Secret

_ids = itertools.count(1)


def _api_error(status: int, message: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    cls = docker.errors.NotFound if status == 404 else docker.errors.APIError
    return cls(message, response=response, explanation=message)


class FakeContainer:
    """A container as docker-py's Container presents it: id, name, status, labels."""

    def __init__(
        self, engine: FakeContainers, *, name: str, labels: dict[str, str], host_port: str
    ) -> None:
        self.engine = engine
        self.id = f"{next(_ids):064x}"
        self.short_id = self.id[:12]
        self.name = name
        self.labels = labels
        self.status = "running"
        self.attrs = {
            "NetworkSettings": {"Ports": {f"{CONTAINER_PORT}/tcp": [{"HostPort": host_port}]}}
        }
        self.stop = mock.MagicMock(side_effect=self._stop)
        self.remove = mock.MagicMock(side_effect=self._remove)

    def reload(self) -> None:
        pass

    def _stop(self, timeout: int = 10) -> None:
        self.status = "exited"

    def _remove(self, force: bool = False, v: bool = False) -> None:
        if self.status in {"running", "restarting", "paused"} and not force:
            raise _api_error(409, "You cannot remove a running container. Stop it first.")
        self.engine.live.pop(self.id, None)


class FakeContainers:
    """Records calls the way docker-py's ContainerCollection would receive them."""

    def __init__(self, *, start_fails: bool = False, host_port: str = "49999") -> None:
        self.run_kwargs: dict[str, Any] = {}
        self.host_port = host_port
        self.live: dict[str, FakeContainer] = {}
        self.start_fails = start_fails  # run() creates the container, then start fails

    def add(self, *, name: str, labels: dict[str, str], status: str) -> FakeContainer:
        container = FakeContainer(self, name=name, labels=labels, host_port=self.host_port)
        container.status = status
        self.live[container.id] = container
        return container

    def run(self, **kwargs: Any) -> FakeContainer:
        if any(c.name == kwargs["name"] for c in self.live.values()):
            raise _api_error(409, f'Conflict. The container name "/{kwargs["name"]}" is in use')
        self.run_kwargs = kwargs
        if self.start_fails:
            self.add(name=kwargs["name"], labels=dict(kwargs["labels"]), status="created")
            raise _api_error(500, "driver failed programming external connectivity")
        return self.add(name=kwargs["name"], labels=dict(kwargs["labels"]), status="running")

    def get(self, key: str) -> FakeContainer:
        for container in self.live.values():
            if key in {container.id, container.name}:
                return container
        raise _api_error(404, "no such container")

    def list(self, *, all: bool = False, filters: dict[str, Any] | None = None) -> list[Any]:
        label = (filters or {}).get("label", "")
        key, _, value = label.partition("=")
        return [c for c in self.live.values() if c.labels.get(key) == value]


def _runtime(containers: FakeContainers) -> DockerRuntime:
    return DockerRuntime(client_factory=lambda: SimpleNamespace(containers=containers))


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
    runtime = _runtime(containers)
    with mock.patch.object(DockerRuntime, "_wait_proven") as wait:
        spawned = runtime.start(SPEC)
    wait.assert_called_once()
    client, agent_name = wait.call_args.args
    assert (client.endpoint, agent_name) == ("http://127.0.0.1:49999", "bot")
    kwargs = containers.run_kwargs
    assert kwargs["image"] == "trinity-agent:test"
    assert kwargs["name"] == "trinity-agent-bot"
    assert kwargs["environment"]["CLAUDE_CODE_OAUTH_TOKEN"].startswith("sk-ant-oat01-")
    assert kwargs["environment"]["TRINITY_AGENT_SECRET"] == "shared-secret-value-123456"
    assert kwargs["ports"] == {f"{CONTAINER_PORT}/tcp": ("127.0.0.1", None)}
    assert kwargs["labels"][LABEL] == "bot"
    assert kwargs["labels"][START_LABEL]  # this start's own id
    container = containers.get(spawned.handle)
    assert runtime.is_alive(name="bot", handle=spawned.handle)
    runtime.stop(name="bot", handle=spawned.handle)
    container.stop.assert_called_once()
    container.remove.assert_called_once()
    assert containers.live == {}


@override_settings(TRINITY_DOCKER_NETWORK="trinity")
def test_on_a_compose_network_the_endpoint_is_the_container_name() -> None:
    containers = FakeContainers()
    runtime = _runtime(containers)
    with mock.patch.object(DockerRuntime, "_wait_proven"):
        spawned = runtime.start(SPEC)
    assert spawned.endpoint == f"http://trinity-agent-bot:{CONTAINER_PORT}"
    assert containers.run_kwargs["network"] == "trinity"
    assert "ports" not in containers.run_kwargs


@pytest.mark.parametrize("status", ["running", "created", "restarting", "paused"])
def test_a_start_that_loses_the_name_leaves_the_winners_container_alone(status: str) -> None:
    """The winner of a start race (or a server already serving) holds the name; the
    loser's create answers 409 and the loser fails, destroying nothing."""
    containers = FakeContainers()
    winner = containers.add(
        name="trinity-agent-bot", labels={LABEL: "bot", START_LABEL: "winner"}, status=status
    )
    with mock.patch.object(DockerRuntime, "_wait_proven"), pytest.raises(StartConflict):
        _runtime(containers).start(SPEC)
    winner.remove.assert_not_called()
    winner.stop.assert_not_called()
    assert list(containers.live.values()) == [winner]


@pytest.mark.parametrize("status", ["exited", "dead"])
def test_a_dead_container_of_the_same_agent_is_stale_and_replaced(status: str) -> None:
    containers = FakeContainers()
    stale = containers.add(
        name="trinity-agent-bot", labels={LABEL: "bot", START_LABEL: "old"}, status=status
    )
    with mock.patch.object(DockerRuntime, "_wait_proven"):
        spawned = _runtime(containers).start(SPEC)
    stale.remove.assert_called_once()
    assert list(containers.live) == [spawned.handle]


@pytest.mark.parametrize(
    "labels", [{}, {LABEL: "other-agent"}], ids=["not-trinity", "another-agent"]
)
def test_a_dead_container_that_is_not_this_agents_is_never_removed(labels: dict[str, str]) -> None:
    containers = FakeContainers()
    foreign = containers.add(name="trinity-agent-bot", labels=labels, status="exited")
    with mock.patch.object(DockerRuntime, "_wait_proven"), pytest.raises(StartConflict):
        _runtime(containers).start(SPEC)
    foreign.remove.assert_not_called()


def test_a_start_that_fails_its_health_wait_removes_only_its_own_container() -> None:
    containers = FakeContainers()
    bystander = containers.add(
        name="trinity-agent-other", labels={LABEL: "other"}, status="running"
    )
    with (
        mock.patch.object(DockerRuntime, "_wait_proven", side_effect=RuntimeError("no /health")),
        pytest.raises(RuntimeError, match="no /health"),
    ):
        _runtime(containers).start(SPEC)
    assert list(containers.live.values()) == [bystander]


def test_a_container_created_but_not_started_by_this_start_is_removed() -> None:
    containers = FakeContainers(start_fails=True)
    with mock.patch.object(DockerRuntime, "_wait_proven"), pytest.raises(docker.errors.APIError):
        _runtime(containers).start(SPEC)
    assert containers.live == {}


def test_discard_removes_every_container_of_the_agent_with_its_volumes() -> None:
    containers = FakeContainers()
    mine = containers.add(name="trinity-agent-bot", labels={LABEL: "bot"}, status="running")
    other = containers.add(name="trinity-agent-other", labels={LABEL: "other"}, status="running")
    _runtime(containers).discard(name="bot")
    mine.remove.assert_called_once_with(force=True, v=True)
    assert list(containers.live.values()) == [other]


def test_a_missing_container_is_not_alive_and_stopping_it_is_harmless() -> None:
    containers = FakeContainers()
    runtime = _runtime(containers)
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


@pytest.fixture
def published_port() -> Iterator[tuple[str, str]]:
    """What answers on the container's published port: a stand-in on loopback."""
    StandIn.seen = []
    directory = Path(tempfile.mkdtemp(prefix="docker-"))
    server, endpoint = serve("tcp", directory)
    yield endpoint, endpoint.rsplit(":", 1)[1]
    close(server)
    shutil.rmtree(directory, ignore_errors=True)


@override_settings(TRINITY_AGENT_IMAGE="trinity-agent:test", TRINITY_DOCKER_NETWORK="")
def test_a_start_returns_once_the_container_proved_the_agents_secret(
    published_port: tuple[str, str],
) -> None:
    endpoint, port = published_port
    StandIn.mode = "honest"
    containers = FakeContainers(host_port=port)
    spawned = _runtime(containers).start(replace(SPEC, secret=PROOF_SECRET))
    assert spawned.endpoint == endpoint
    assert [seen["path"].split("=")[0] for seen in StandIn.seen] == ["/health?nonce"]
    assert "Authorization" not in StandIn.seen[0]["headers"]


@pytest.mark.parametrize("mode", ["wrong secret", "replay", "no proof"])
@override_settings(TRINITY_AGENT_IMAGE="trinity-agent:test", TRINITY_DOCKER_NETWORK="")
def test_a_start_fails_naming_the_endpoint_when_what_answers_there_cannot_prove_it(
    published_port: tuple[str, str], mode: str
) -> None:
    endpoint, port = published_port
    StandIn.mode = mode
    containers = FakeContainers(host_port=port)
    with pytest.raises(RuntimeError, match="did not prove it holds the agent's secret") as err:
        _runtime(containers).start(replace(SPEC, secret=PROOF_SECRET))
    assert endpoint in str(err.value)
    assert containers.live == {}  # the container that never proved itself is removed
    assert all(seen["method"] == "GET" for seen in StandIn.seen)
    assert all("Authorization" not in seen["headers"] for seen in StandIn.seen)
