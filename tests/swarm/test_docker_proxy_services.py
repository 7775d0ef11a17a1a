"""deploy/docker_proxy on a swarm manager: the swarm runtime's calls pass, on the
agent's own service and secrets, and nothing else does.

The proxy runs in front of a real swarm manager's socket (``swarm_manager``, with the
agent image; ``swarm_network``, the agents' overlay as the stack makes it); the client
side is the real docker SDK and the real ``SwarmRuntime``, pointed at the proxy over
TCP as the stack points web and worker at it. A refusal is shown to have reached
nothing by what the manager itself then holds. The readers' tables (no engine) are
tests/deploy/test_docker_proxy_service_body.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.errors
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import CAPABILITIES, GUARD_CAPABILITIES
from agents.runtimes.swarm import SwarmRuntime, _post_service, agents_overlay
from agents.runtimes.swarm_spec import (
    LABEL,
    secret_name,
    service_body,
    service_name,
)
from tests.deploy.conftest import IMAGE, proxy
from trinity.crypto import Secret

AGENT = f"pxy{os.getpid()}"
OTHER_AGENT = f"pxo{os.getpid()}"
STRAY = f"pxs{os.getpid()}"


def swarm_settings(network: str, **changes: Any) -> dict[str, Any]:
    """The swarm runtime's settings: the stack's (the network made already), the
    platform off the swarm's networks, so it reaches a server on its node's port."""
    return {
        "TRINITY_AGENT_BACKEND": "swarm",
        "TRINITY_AGENT_IMAGE": IMAGE,
        "TRINITY_SWARM_NETWORK": network,
        "TRINITY_SWARM_NETWORK_CREATE": False,
        "TRINITY_SWARM_ENDPOINT": "published",
        "TRINITY_SWARM_CONSTRAINTS": "node.platform.os==linux",
        "TRINITY_SWARM_MEMORY_RESERVATION": "64m",
        "TRINITY_SWARM_CPU_RESERVATION_MILLICORES": 100,
        "TRINITY_AGENT_MEMORY_LIMIT": "1g",
        "TRINITY_AGENT_CPU_MILLICORES": 1500,
        "TRINITY_AGENT_PIDS_LIMIT": 256,
        **changes,
    }


def spec(name: str = AGENT) -> SpawnSpec:
    return SpawnSpec(name=name, runtime="claude-code", model="", secret=Secret("s3cret"))


def labelled(engine: Any, kind: str, agent: str) -> list[str]:
    """The names of the manager's services or secrets labelled as ``agent``'s."""
    listed = getattr(engine.api, kind)(filters={"label": f"{LABEL}={agent}"})
    return sorted(item["Spec"]["Name"] for item in listed)


def _clean(engine: Any) -> None:
    for agent in (AGENT, OTHER_AGENT, STRAY):
        for service in engine.api.services(filters={"label": f"{LABEL}={agent}"}):
            engine.api.remove_service(service["ID"])
        for secret in engine.api.secrets(filters={"label": f"{LABEL}={agent}"}):
            engine.api.remove_secret(secret["ID"])
    for service in engine.api.services(filters={"name": service_name(STRAY)}):
        engine.api.remove_service(service["ID"])


def serving(policy: Any, socket_path: str) -> Iterator[str]:
    server = proxy.serve(policy, listen=("127.0.0.1", 0), engine=socket_path)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def agents_network(swarm_manager: Any, swarm_network: str) -> str:
    """The agents' overlay, made here when no test before made it, as ``docker stack
    deploy`` makes it in the stack (unencrypted, as tests/swarm/conftest.py says why);
    it goes with the swarm."""
    if not [
        n for n in swarm_manager.api.networks(names=[swarm_network]) if n["Name"] == swarm_network
    ]:
        labels = {"trinity.network": "agents"}
        swarm_manager.networks.create(swarm_network, driver="overlay", labels=labels)
    return swarm_network


@pytest.fixture
def proxy_url(swarm_manager: Any, swarm_socket: str, agents_network: str) -> Iterator[str]:
    """The proxy in front of the manager's socket, for the agents' image and overlay;
    whatever it let the manager make for these tests' agents goes after."""
    policy = proxy.Policy(image=IMAGE, network=agents_network)
    try:
        yield from serving(policy, swarm_socket)
    finally:
        _clean(swarm_manager)


@pytest.fixture
def client(proxy_url: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=proxy_url, version="auto", timeout=60)


def test_the_swarm_runtime_starts_inspects_stops_and_discards_through_the_proxy(
    swarm_manager: Any, swarm_network: str, client: docker.DockerClient
) -> None:
    with override_settings(**swarm_settings(swarm_network)):
        runtime = SwarmRuntime(client_factory=lambda: client)
        spawned = runtime.start(spec())
        alive = runtime.is_alive(name=AGENT, handle=spawned.handle)
        made = swarm_manager.api.inspect_service(spawned.handle)["Spec"]
        runtime.stop(name=AGENT, handle=spawned.handle)
        stopped = (
            labelled(swarm_manager, "services", AGENT),
            labelled(swarm_manager, "secrets", AGENT),
        )
        runtime.start(spec())
        runtime.discard(name=AGENT)

    assert alive is True
    # What the manager made of the create the proxy rebuilt: the runtime's hardening.
    container = made["TaskTemplate"]["ContainerSpec"]
    assert (container["CapabilityDrop"], container["ReadOnly"]) == (["ALL"], True)
    assert sorted(container["CapabilityAdd"]) == sorted([*CAPABILITIES, *GUARD_CAPABILITIES])
    assert [s["File"]["Mode"] for s in container["Secrets"]] == [0o400]
    assert stopped == ([], [])
    assert labelled(swarm_manager, "services", AGENT) == []
    assert labelled(swarm_manager, "secrets", AGENT) == []


@pytest.fixture
def namesakes(swarm_manager: Any, swarm_network: str) -> Iterator[None]:
    """Networks whose names hold the agents' network's: a local one (which the engine's
    name filter finds) and an overlay."""
    made = [
        swarm_manager.networks.create(f"{swarm_network}-loc{os.getpid()}", driver="bridge"),
        swarm_manager.networks.create(f"{swarm_network}-ovl{os.getpid()}", driver="overlay"),
    ]
    yield
    for network in made:
        network.remove()


def test_the_network_lookup_finds_the_agents_network_and_only_it(
    swarm_manager: Any, swarm_network: str, client: docker.DockerClient, namesakes: None
) -> None:
    direct = swarm_manager.api.networks(names=[swarm_network])

    with override_settings(**swarm_settings(swarm_network)):
        found = agents_overlay(client)
    listed = client.api.networks(names=[swarm_network])

    assert len(direct) > 1  # the engine's own answer holds a namesake
    assert found == swarm_manager.networks.get(swarm_network).id
    assert [n["Name"] for n in listed] == [swarm_network]


@pytest.fixture
def fresh_network(swarm_manager: Any) -> Iterator[str]:
    name = f"trinity-agents-made{os.getpid()}"
    yield name
    for network in swarm_manager.networks.list(names=[name]):
        if network.name == name:
            network.remove()


@pytest.mark.parametrize("encrypted", [True, False])
def test_the_runtime_makes_the_agents_network_through_the_proxy(
    swarm_manager: Any, swarm_socket: str, fresh_network: str, encrypted: bool
) -> None:
    policy = proxy.Policy(image=IMAGE, network=fresh_network)
    changes = {"TRINITY_SWARM_NETWORK_CREATE": True, "TRINITY_SWARM_NETWORK_ENCRYPTED": encrypted}
    for url in serving(policy, swarm_socket):
        client = docker.DockerClient(base_url=url, version="auto", timeout=60)
        with override_settings(**swarm_settings(fresh_network, **changes)):
            made = agents_overlay(client)
        with pytest.raises(docker.errors.APIError) as refused:
            client.api.create_network(fresh_network, driver="overlay", attachable=True)

    network = swarm_manager.api.inspect_network(made)
    assert (network["Name"], network["Driver"], network["Attachable"]) == (
        fresh_network,
        "overlay",
        False,
    )
    assert ("encrypted" in (network["Options"] or {})) is encrypted
    assert refused.value.status_code == 403


@pytest.fixture
def secrets_elsewhere(swarm_manager: Any) -> Iterator[dict[str, tuple[str, str]]]:
    """Secrets an agent's service must not mount: one under an agent's name that is not
    labelled as any agent's, one of another agent. (id, name) by kind."""
    stray_name = secret_name(STRAY, "x")
    other_name = secret_name(OTHER_AGENT, "x")
    stray = swarm_manager.api.create_secret(stray_name, b"postgres-password")["ID"]
    other = swarm_manager.api.create_secret(
        other_name, b"other-agents-token", labels={LABEL: OTHER_AGENT}
    )["ID"]
    yield {"unlabelled": (stray, stray_name), "another agent's": (other, other_name)}
    _clean(swarm_manager)  # a service a failing test made holds them
    for secret_id in (stray, other):
        try:
            swarm_manager.api.remove_secret(secret_id)
        except docker.errors.NotFound:
            pass


def _body(
    client: docker.DockerClient, network: str, secret: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The runtime's own create for AGENT (through the proxy: its network lookup and,
    unless ``secret`` is given, its new secret)."""
    start_id = secrets.token_hex(6)
    with override_settings(**swarm_settings(network)):
        network_id = agents_overlay(client)
        if secret is None:
            secret = SwarmRuntime._create_secret(client, spec(), start_id)
        return service_body(spec(), network=network_id, secret=secret, start_id=start_id)


def _container(body: dict[str, Any]) -> dict[str, Any]:
    return body["TaskTemplate"]["ContainerSpec"]


REFUSED: dict[str, Callable[[dict[str, Any], Any], None]] = {
    "a bind mount of the host": lambda body, _: _container(body)["Mounts"].append(
        {"Type": "bind", "Source": "/", "Target": "/host"}
    ),
    "privileges": lambda body, _: _container(body).update(
        {"Privileges": {"SELinuxContext": {"Disable": True}}}
    ),
    "another image": lambda body, _: _container(body).update({"Image": "trinity-base:x"}),
    "the ingress network": lambda body, engine: body["TaskTemplate"].update(
        {"Networks": [{"Target": engine.networks.get("ingress").id}]}
    ),
    "restart condition any": lambda body, _: body["TaskTemplate"]["RestartPolicy"].update(
        {"Condition": "any"}
    ),
    "a port on every node": lambda body, _: body.update(
        {"EndpointSpec": {"Ports": [{"TargetPort": 8080, "PublishedPort": 18080}]}}
    ),
}


@pytest.mark.parametrize("change", list(REFUSED.values()), ids=list(REFUSED))
def test_a_service_create_that_is_not_an_agents_is_refused_and_makes_nothing(
    swarm_manager: Any,
    swarm_network: str,
    client: docker.DockerClient,
    change: Callable[[dict[str, Any], Any], None],
) -> None:
    body = _body(client, swarm_network)
    change(body, swarm_manager)

    with pytest.raises(docker.errors.APIError) as refused:
        _post_service(client, body)

    assert refused.value.status_code == 403
    assert "docker proxy" in str(refused.value)
    assert labelled(swarm_manager, "services", AGENT) == []


@pytest.mark.parametrize("kind", ["unlabelled", "another agent's"])
def test_a_service_may_mount_only_its_own_agents_secret(
    swarm_manager: Any,
    swarm_network: str,
    client: docker.DockerClient,
    secrets_elsewhere: dict[str, tuple[str, str]],
    kind: str,
) -> None:
    body = _body(client, swarm_network, secret=secrets_elsewhere[kind])

    with pytest.raises(docker.errors.APIError) as refused:
        _post_service(client, body)

    assert refused.value.status_code == 403
    assert "is not" in str(refused.value) and "secret" in str(refused.value)
    assert swarm_manager.api.services(filters={"name": service_name(AGENT)}) == []


def test_the_runtimes_unchanged_create_passes(
    swarm_manager: Any, swarm_network: str, client: docker.DockerClient
) -> None:
    """The control for the refusals above: the same body, unchanged, makes the
    service."""
    created = _post_service(client, _body(client, swarm_network))

    assert swarm_manager.api.inspect_service(created["ID"])["Spec"]["Name"] == service_name(AGENT)


@pytest.fixture
def bystander(swarm_manager: Any) -> Iterator[Any]:
    """A service that is not an agent's (as the stack's postgres is), with a secret."""
    secret = swarm_manager.secrets.create(name=f"bystander-{os.getpid()}", data=b"db-password")
    service = swarm_manager.services.create(
        IMAGE,
        ["sleep", "600"],
        name=f"bystander-{os.getpid()}",
        secrets=[docker.types.SecretReference(secret.id, secret.name)],
    )
    yield service, secret
    service.remove()
    secret.remove()


def test_other_services_and_secrets_cannot_be_read_or_removed(
    swarm_manager: Any, client: docker.DockerClient, bystander: Any
) -> None:
    service, secret = bystander
    for call in (
        lambda: client.api.inspect_service(service.name),
        lambda: client.api.inspect_service(service.id),
        lambda: client.api.remove_service(service.id),
        lambda: client.api.tasks(filters={"service": service.id}),
        lambda: client.api.remove_secret(secret.id),
    ):
        with pytest.raises(docker.errors.APIError) as refused:
            call()
        assert refused.value.status_code == 404
    assert swarm_manager.api.inspect_service(service.id)["ID"] == service.id
    assert swarm_manager.api.inspect_secret(secret.id)["ID"] == secret.id


def test_a_secret_create_that_is_not_an_agents_is_refused(
    swarm_manager: Any, client: docker.DockerClient
) -> None:
    data = base64.b64encode(b"canary").decode()
    for name, labels in (
        (f"postgres-{os.getpid()}", {LABEL: AGENT}),
        (secret_name(AGENT, "y"), {}),
        (secret_name(AGENT, "z"), {LABEL: AGENT, "com.docker.stack.namespace": "x"}),
    ):
        with pytest.raises(docker.errors.APIError) as refused:
            client.api.create_secret(name, data, labels=labels)
        assert refused.value.status_code == 403
        assert "canary" not in str(refused.value) and data not in str(refused.value)
    assert [s for s in swarm_manager.api.secrets() if str(os.getpid()) in s["Spec"]["Name"]] == []


def test_a_task_and_node_read_pass_for_an_agents_service(
    swarm_manager: Any, swarm_network: str, client: docker.DockerClient
) -> None:
    created = _post_service(client, _body(client, swarm_network))
    deadline = time.monotonic() + 30
    while not (tasks := client.api.tasks(filters={"service": service_name(AGENT)})):
        assert time.monotonic() < deadline, "the manager made no task for the service"
        time.sleep(0.5)
    node_id = tasks[0].get("NodeID") or swarm_manager.info()["Swarm"]["NodeID"]
    listed = client.api.services(filters={"label": f"{LABEL}={AGENT}"})

    assert {t["ServiceID"] for t in tasks} == {created["ID"]}
    assert client.api.inspect_node(node_id)["ID"] == node_id
    assert [s["ID"] for s in listed] == [created["ID"]]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.swarm.reload(),  # the swarm's inspect holds its join tokens
        lambda c: c.nodes.list(),
        lambda c: c.services.list(),  # unfiltered: would name every service
        lambda c: c.api.secrets(),
        lambda c: c.configs.list(),
        lambda c: c.api.tasks(),
        lambda c: c.api.networks(),
        lambda c: c.api.update_node("x", 1, {"Role": "manager"}),
        # (the SDK's service_logs asks an inspect after the logs; the logs call alone)
        lambda c: c.api._result(c.api._get(c.api._url("/services/{0}/logs", "x"))),
        lambda c: c.api.inspect_secret("x"),
    ],
)
def test_every_other_swarm_call_is_refused(client: docker.DockerClient, call: Any) -> None:
    with pytest.raises(docker.errors.APIError) as refused:
        call(client)
    assert refused.value.status_code == 403
    assert "docker proxy" in str(refused.value)


def _send(url: str, body: bytes) -> tuple[int, str]:
    host, port = url.removeprefix("tcp://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        connection.request("POST", "/v1.41/services/create", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


@pytest.mark.parametrize(
    "rewrite",
    [
        # Go reads the last of two keys equal but for case: this would name postgres.
        lambda text: text.replace('"Name": ', '"name": "postgres", "Name": ', 1),
        # a lower-case key reads as its field to Go: here, Privileges
        lambda text: text.replace(
            '"ReadOnly": true', '"ReadOnly": true, "privileges": {"SELinuxContext": {}}', 1
        ),
        # Go folds the long s onto s: "Secret\u017fs" is Secrets
        lambda text: text.replace('"Secrets":', '"Secrets": [], "Secret\\u017fs":', 1),
    ],
)
def test_a_service_create_the_engine_reads_otherwise_is_refused(
    swarm_manager: Any,
    swarm_network: str,
    client: docker.DockerClient,
    proxy_url: str,
    rewrite: Callable[[str], str],
) -> None:
    text = json.dumps(_body(client, swarm_network))
    status, answer = _send(proxy_url, rewrite(text).encode())

    assert status in (400, 403) and "docker proxy" in answer, answer
    assert labelled(swarm_manager, "services", AGENT) == []
