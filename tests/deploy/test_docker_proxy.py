"""deploy/docker_proxy.py: the only holder of the engine's socket forwards the agent
runtime's calls on agent containers and refuses the rest.

The proxy runs in front of the real engine `make test` uses (DOCKER_HOST), on the
agents' network the container tests create, with the agent image they build; the
client side is the real docker SDK and the real ``DockerRuntime``, pointed at the
proxy over TCP as compose points web and worker at it. A refusal is shown to have
reached nothing by what the engine itself then holds. The proxy under compose, with
agents started through it, is tests/deploy/test_compose_up.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import docker.errors
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import LABEL, DockerRuntime
from tests.containers import NETWORK, docker_settings
from trinity.crypto import Secret

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "trinity-agent:latest"
NAME = "trinity-agent-bot"


def _load_proxy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docker_proxy", ROOT / "deploy/docker_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docker_proxy"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


proxy = _load_proxy()


def _named(engine: Any, name: str = NAME) -> list[Any]:
    """What the engine holds under ``name`` (the name filter is a substring match)."""
    return [c for c in engine.containers.list(all=True, filters={"name": name}) if c.name == name]


@pytest.fixture
def proxy_url(engine: Any, agent_image: str, gateway: str) -> Iterator[str]:
    """The proxy in front of the real engine's socket; whatever it let the engine
    create under the agent's name goes after."""
    assert agent_image == IMAGE
    socket_path = os.environ["DOCKER_HOST"].removeprefix("unix://")
    policy = proxy.Policy(image=IMAGE, network=NETWORK)
    server = proxy.serve(policy, listen=("127.0.0.1", 0), engine=socket_path)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    for container in _named(engine):
        container.remove(force=True, v=True)


@pytest.fixture
def client(proxy_url: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=proxy_url, version="auto", timeout=30)


def spec() -> SpawnSpec:
    return SpawnSpec(name="bot", runtime="claude-code", model="", secret=Secret("s3cret"))


def test_the_agent_runtime_starts_inspects_stops_and_discards_through_the_proxy(
    engine: Any, client: docker.DockerClient
) -> None:
    # As under compose, the network is made already, and the proxy answers no network
    # call; the platform here is on the host, so it proves the server by its address.
    with override_settings(**{**docker_settings(IMAGE), "TRINITY_DOCKER_NETWORK_CREATE": False}):
        runtime = DockerRuntime(client_factory=lambda: client)
        spawned = runtime.start(spec())
        alive = runtime.is_alive(name="bot", handle=spawned.handle)
        runtime.stop(name="bot", handle=spawned.handle)
        stopped = _named(engine)
        runtime.start(spec())
        runtime.discard(name="bot")

    assert alive is True
    assert stopped == []
    assert _named(engine) == []


def test_the_runtimes_own_create_passes_the_policy() -> None:
    """The create body the docker SDK builds from DockerRuntime's arguments."""
    from docker.models.containers import _create_container_args

    with override_settings(TRINITY_AGENT_IMAGE=IMAGE):
        kwargs = DockerRuntime()._run_kwargs(spec(), NETWORK, "x")
    args = _create_container_args({**kwargs, "version": "1.45"})
    body = {
        "Image": args["image"],
        "Labels": args["labels"],
        "HostConfig": dict(args["host_config"]),
        "NetworkingConfig": {"EndpointsConfig": args["networking_config"]},
    }
    policy = proxy.Policy(image=IMAGE, network=NETWORK)
    assert proxy.create_refusal(policy, name="trinity-agent-bot", body=body) is None


AGENT = {"image": IMAGE, "labels": {LABEL: "bot"}, "network": NETWORK}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"volumes": {"/": {"bind": "/host", "mode": "rw"}}}, "Binds"),
        ({"volumes": {"pgdata": {"bind": "/data", "mode": "rw"}}}, "Binds"),
        ({"privileged": True}, "Privileged"),
        ({"cap_add": ["SYS_ADMIN"]}, "CapAdd"),
        ({"devices": ["/dev/sda:/dev/sda"]}, "Devices"),
        ({"pid_mode": "host"}, "PidMode"),
        ({"network_mode": "host", "network": None}, "network only"),
        ({"network": "trinity-backend"}, "network only"),
        ({"image": "alpine:3"}, "agent image"),
        ({"labels": {}}, "label"),
        ({"name": "postgres-2"}, "name must start"),
        ({"ports": {"8080/tcp": ("0.0.0.0", 8080)}}, "loopback only"),  # noqa: S104
        ({"security_opt": ["seccomp=unconfined"]}, "no-new-privileges"),
    ],
)
def test_a_create_that_is_not_an_agent_container_is_refused(
    engine: Any, client: docker.DockerClient, changes: dict[str, Any], reason: str
) -> None:
    kwargs = {**AGENT, "name": NAME, **changes}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with pytest.raises(docker.errors.APIError) as refused:
        client.containers.create(**kwargs)
    assert refused.value.status_code == 403
    assert reason in str(refused.value)
    assert _named(engine, kwargs["name"]) == []


@pytest.fixture
def bystander(engine: Any, agent_image: str) -> Iterator[Any]:
    """A container that is not an agent's (as postgres is), running on the engine."""
    container = engine.containers.run(
        agent_image, ["sleep", "600"], name=f"bystander-{os.getpid()}", detach=True
    )
    yield container
    container.remove(force=True, v=True)


def test_other_containers_cannot_be_read_stopped_or_removed(
    client: docker.DockerClient, bystander: Any
) -> None:
    for call in (
        lambda: client.containers.get(bystander.name),  # postgres's env holds the DB password
        lambda: client.api.stop(bystander.id),
        lambda: client.api.remove_container(bystander.id, force=True),
        lambda: client.api.start(bystander.id),
    ):
        with pytest.raises(docker.errors.APIError) as refused:
            call()
        assert refused.value.status_code == 404
    bystander.reload()
    assert bystander.status == "running"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.images.list(),
        lambda c: c.images.pull("alpine", tag="3"),
        lambda c: c.volumes.list(),
        lambda c: c.networks.list(),
        lambda c: c.containers.list(all=True),  # unfiltered: would name every container
        lambda c: c.api.exec_create("trinity-agent-bot", "sh"),
        lambda c: c.info(),
    ],
)
def test_every_other_engine_call_is_refused(client: docker.DockerClient, call: Any) -> None:
    """Each of these answers on the engine itself (the images, volumes, networks and
    the info are there to list): the proxy's own refusal is what fails them, and it
    says so, so no answer of the engine's (a pull's 404 here) passes for one."""
    with pytest.raises(docker.errors.APIError) as refused:
        call(client)
    assert refused.value.status_code == 403
    assert "docker proxy" in str(refused.value)


@pytest.mark.parametrize(("host_config", "status"), [({}, 201), ({"Privileged": True}, 403)])
def test_a_chunked_create_is_checked_whole_like_any_other(
    engine: Any, proxy_url: str, host_config: dict[str, Any], status: int
) -> None:
    import http.client

    host, port = proxy_url.removeprefix("tcp://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    body = json.dumps(
        {
            "Image": IMAGE,
            "Labels": {LABEL: "bot"},
            "HostConfig": {"NetworkMode": NETWORK, **host_config},
        }
    ).encode()
    connection.request(
        "POST",
        "/containers/create?name=trinity-agent-bot",
        body=iter([body[:10], body[10:]]),
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert response.status == status
    assert len(_named(engine)) == (1 if status == 201 else 0)
