"""deploy/docker_proxy: the only holder of the engine's socket forwards the agent
runtime's calls on agent containers and refuses the rest.

The proxy runs in front of the real engine `make test` uses (DOCKER_HOST), on the
agents' network the container tests create, with the agent image they build; the
client side is the real docker SDK and the real ``DockerRuntime``, pointed at the
proxy over TCP as compose points web and worker at it. A refusal is shown to have
reached nothing by what the engine itself then holds. Raw requests the SDK would never
send (the bypasses) are tests/deploy/test_docker_proxy_bypasses.py; the proxy under
compose, with agents started through it, is tests/deploy/test_compose_up.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest
from django.test import override_settings

from agents.runtimes.docker import CAPABILITIES, GUARD_CAPABILITIES, WORK_AREA, DockerRuntime
from tests.containers import NETWORK, docker_settings
from tests.deploy.conftest import (
    IMAGE,
    NAME,
    named,
    proxy,
    runtime_kwargs,
    sdk_create,
    spawn_spec,
)


@pytest.fixture
def client(proxy_url: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=proxy_url, version="auto", timeout=30)


def test_the_agent_runtime_starts_inspects_stops_and_discards_through_the_proxy(
    engine: Any, client: docker.DockerClient
) -> None:
    # As under compose, the network is made already, and the proxy answers no network
    # call; the platform here is on the host, so it proves the server by its address.
    with override_settings(**{**docker_settings(IMAGE), "TRINITY_DOCKER_NETWORK_CREATE": False}):
        runtime = DockerRuntime(client_factory=lambda: client)
        spawned = runtime.start(spawn_spec())
        alive = runtime.is_alive(name="bot", handle=spawned.handle)
        host = engine.api.inspect_container(spawned.handle)["HostConfig"]
        runtime.stop(name="bot", handle=spawned.handle)
        stopped = named(engine)
        runtime.start(spawn_spec())
        runtime.discard(name="bot")

    assert alive is True
    # What the engine made of the create the proxy rebuilt: the runtime's hardening.
    added = sorted([*CAPABILITIES, *GUARD_CAPABILITIES])
    assert (host["CapDrop"], sorted(host["CapAdd"])) == (["ALL"], added)
    assert (host["ReadonlyRootfs"], host["SecurityOpt"]) == (True, ["no-new-privileges:true"])
    assert stopped == []
    assert named(engine) == []


def test_the_runtimes_own_create_is_what_the_proxy_forwards() -> None:
    """The body the docker SDK builds from DockerRuntime's arguments reads back as
    itself, but for the SDK's NetworkingConfig (``{<network>: null}``, a shape the
    engine ignores: the network is HostConfig.NetworkMode) and the work area mount's
    null Source, which the rebuilt body leaves out."""
    name, body = sdk_create(runtime_kwargs())
    read = proxy.create.create_reader(proxy.Policy(image=IMAGE, network=NETWORK))

    assert name == NAME
    assert body["NetworkingConfig"] == {NETWORK: None}
    assert body["HostConfig"]["Mounts"] == [
        {"Target": WORK_AREA, "Source": None, "Type": "volume", "ReadOnly": False}
    ]
    host = {
        **body["HostConfig"],
        "Mounts": [{"Target": WORK_AREA, "Type": "volume", "ReadOnly": False}],
    }
    rebuilt = {**{k: v for k, v in body.items() if k != "NetworkingConfig"}, "HostConfig": host}
    assert read(body, "create") == rebuilt


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"volumes": {"/": {"bind": "/host", "mode": "rw"}}}, "create.'Volumes'"),
        ({"volumes": {"pgdata": {"bind": "/data", "mode": "rw"}}}, "create.'Volumes'"),
        ({"privileged": True}, "HostConfig.'Privileged'"),
        ({"cap_add": ["SYS_ADMIN"]}, "not 'SYS_ADMIN'"),
        ({"devices": ["/dev/sda:/dev/sda"]}, "HostConfig.'Devices'"),
        ({"pid_mode": "host"}, "HostConfig.'PidMode'"),
        ({"network_mode": "host", "network": None}, "NetworkMode must be"),
        ({"network": "trinity-backend"}, "NetworkMode must be"),
        ({"image": "alpine:3"}, "Image must be"),
        ({"labels": {}}, "label"),
        ({"name": "postgres-2"}, "name must start"),
        ({"ports": {"8080/tcp": ("127.0.0.1", 8080)}}, "create.'ExposedPorts'"),
        ({"security_opt": ["no-new-privileges:true", "seccomp=unconfined"]}, "SecurityOpt"),
        ({"security_opt": None}, "sets create.HostConfig.SecurityOpt"),
        ({"security_opt": ["no-new-privileges:false"]}, "SecurityOpt must be"),
        ({"cap_drop": None}, "sets create.HostConfig.CapDrop"),
        ({"read_only": False}, "ReadonlyRootfs must be True"),
        ({"pids_limit": -1}, "PidsLimit must be a positive integer"),
        ({"mem_limit": None}, "sets create.HostConfig.Memory"),
        ({"tmpfs": {"/tmp": "rw,suid"}}, "option"),
        ({"tmpfs": {"/etc": "rw,nosuid,nodev"}}, "tmpfs"),
        ({"user": "root"}, "create.'User'"),
        ({"mounts": [docker.types.Mount("/srv/trinity-agent", "data")]}, "Source must be empty"),
    ],
)
def test_a_create_that_is_not_an_agent_container_is_refused(
    engine: Any, client: docker.DockerClient, changes: dict[str, Any], reason: str
) -> None:
    kwargs = {**runtime_kwargs(), **changes}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with pytest.raises(docker.errors.APIError) as refused:
        client.containers.create(**kwargs)
    assert refused.value.status_code == 403
    assert reason in str(refused.value)
    assert named(engine, kwargs["name"]) == []


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
        lambda c: c.containers.list(filters={"name": "postgres"}),
        lambda c: c.api.exec_create("trinity-agent-bot", "sh"),
        lambda c: c.api.kill("trinity-agent-bot"),
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
