"""The docker runtime's rules on a real engine: which container a start may remove,
what it leaves alone, how it fails. Agents' servers run from the agent image; the
leftovers and impostors are real containers made here."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from agents.client import AgentServerClient
from agents.runtimes.base import SpawnSpec, StartConflict
from agents.runtimes.docker import LABEL, DockerRuntime, wait_proven
from tests.containers import NETWORK, docker_settings
from trinity.crypto import Secret

SPEC = SpawnSpec(
    name="rules",
    runtime="claude-code",
    model="",
    secret=Secret("shared-secret-value-" + "x" * 24),
    credentials={"CLAUDE_CODE_OAUTH_TOKEN": Secret("sk-ant-oat01-" + "y" * 40)},
)
NAME = "trinity-agent-rules"


@pytest.fixture
def runtime(agent_image: str, gateway: str, engine: Any) -> Iterator[DockerRuntime]:
    """The runtime on the test network; whatever holds the test agent's name goes after."""
    with override_settings(**docker_settings(agent_image)):
        yield DockerRuntime()
    for container in engine.containers.list(all=True, filters={"name": NAME}):
        container.remove(force=True, v=True)


def _holder(engine: Any, image: str, *, labels: dict[str, str], running: bool) -> Any:
    """A container holding the agent's name that this runtime did not start."""
    container = engine.containers.run(
        image, ["sleep", "600"], name=NAME, labels=labels, network=NETWORK, detach=True
    )
    if not running:
        container.stop(timeout=1)
    container.reload()
    return container


def test_an_exited_container_of_the_same_agent_is_stale_and_replaced(
    runtime: DockerRuntime, engine: Any
) -> None:
    first = runtime.start(SPEC)
    old = engine.containers.get(first.handle)
    old.stop(timeout=5)
    second = runtime.start(SPEC)
    assert second.handle != first.handle
    assert [c.id for c in engine.containers.list(all=True, filters={"name": NAME})] == [
        second.handle
    ]
    assert runtime.is_alive(name="rules", handle=second.handle)


@pytest.mark.parametrize(
    ("labels", "running"),
    [({}, False), ({LABEL: "someone-else"}, False), ({LABEL: "rules"}, True)],
    ids=["unlabelled-exited", "another-agents-exited", "this-agents-running"],
)
def test_a_name_held_by_what_this_start_may_not_remove_fails_and_is_left_alone(
    runtime: DockerRuntime, engine: Any, agent_image: str, labels: dict[str, str], running: bool
) -> None:
    holder = _holder(engine, agent_image, labels=labels, running=running)
    with pytest.raises(StartConflict, match="docker rm -f trinity-agent-rules"):
        runtime.start(SPEC)
    still = engine.containers.get(holder.id)
    assert still.status == ("running" if running else "exited")


def test_a_container_that_exits_before_its_server_proves_itself_fails_fast_and_goes(
    agent_image: str, gateway: str, engine: Any
) -> None:
    """An image without the agent server (the Debian base with a `python`) exits at
    once: the start says so with the container's own words, long before the startup
    timeout, and removes what it created."""
    base = next(t for i in engine.images.list("trinity-base") for t in i.tags)
    recipe = f"FROM {base}\nRUN ln -s /usr/bin/python3 /usr/local/bin/python\n"
    broken, _ = engine.images.build(
        fileobj=io.BytesIO(recipe.encode()), tag="trinity-broken:test", rm=True
    )
    with override_settings(**{**docker_settings(agent_image), "TRINITY_AGENT_IMAGE": broken.id}):
        began = time.monotonic()
        with pytest.raises(RuntimeError, match=r"exited \(code \d+\) before its server came up"):
            DockerRuntime().start(SPEC)
    assert time.monotonic() - began < 20
    assert engine.containers.list(all=True, filters={"name": NAME}) == []


def test_a_server_that_cannot_prove_the_agents_secret_is_named_and_never_trusted(
    runtime: DockerRuntime, engine: Any, agent_image: str
) -> None:
    """A real agent server holding another secret answers on the address: the wait
    fails at once, naming the endpoint, and sends it nothing."""
    impostor = engine.containers.run(
        agent_image,
        ["python", "-m", "agent_server", "--host", "0.0.0.0", "--port", "8080"],  # noqa: S104
        name=NAME,
        environment={"TRINITY_AGENT_SECRET": "another-secret-" + "z" * 30},
        network=NETWORK,
        detach=True,
    )
    impostor.reload()
    address = impostor.attrs["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]
    endpoint = f"http://{address}:8080"
    client = AgentServerClient(endpoint=endpoint, secret=SPEC.secret, handle=impostor.id)
    with pytest.raises(RuntimeError, match=f"the endpoint {endpoint} did not prove"):
        wait_proven(client, "rules", lambda: None)


def test_a_missing_container_is_not_alive_and_stopping_it_is_harmless(
    runtime: DockerRuntime,
) -> None:
    assert not runtime.is_alive(name="rules", handle="0" * 64)
    runtime.stop(name="rules", handle="0" * 64)
    runtime.discard(name="rules")


def test_the_spawn_spec_repr_hides_credentials() -> None:
    assert "sk-ant-oat01" not in repr(SPEC)
    assert "shared-secret-value" not in repr(SPEC)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_the_backend_setting_selects_the_runtime(backend: str) -> None:
    from agents.runtimes import get_runtime

    with override_settings(TRINITY_AGENT_BACKEND=backend):
        assert get_runtime().name == backend
