"""The swarm tests' fixtures: a real swarm of three nodes (one manager, two workers)
made by deploy/swarm.py, each node its own engine in its own network namespace, the
images loaded into each node, and the platform on the swarm runtime.

The platform runs here, on the host, outside the swarm's networks, so it reaches each
agent's server at the port published on its task's node
(TRINITY_SWARM_ENDPOINT=published); the stack test runs the platform in the swarm,
reaching agents by name. The provider simulator listens on the host's address on the
swarm's bridge, which the agents' tasks reach through their node; Postgres and Redis
listen on the host's loopback, which no node reaches.

The agents' overlay is unencrypted here: this machine's kernel has no IPsec AEAD
cipher (the engine's log says "function not implemented" for every security
association), so an encrypted overlay carries nothing between nodes.
test_swarm_runtime_e2e.py pins that the runtime asks for encryption by default.

Nothing is mocked. Without an engine or root these tests skip, saying so; with CI=true
that skip fails the run (tests/skip_policy.py). Everything the harness made goes at
the end of the session, even after a failure (deploy/swarm.py down).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.conftest import platform_on

REPO = Path(__file__).resolve().parents[2]
NETWORK = f"trinity-agents-swarm-{os.getpid()}"
# Node labels the harness sets, so a test can place an agent on a worker node.
POOL_LABEL = "trinity.pool"


@dataclass(frozen=True)
class Node:
    name: str
    role: str
    address: str
    socket: str
    client: Any


@dataclass
class Swarm:
    nodes: list[Node]
    host_address: str
    main_engine: Any
    loaded: set[str] = field(default_factory=set)

    @property
    def manager(self) -> Any:
        return self.nodes[0].client

    @property
    def workers(self) -> list[Node]:
        return [node for node in self.nodes if node.role == "worker"]

    def node_of(self, node_id: str) -> Node:
        address = self.manager.api.inspect_node(node_id)["Status"]["Addr"]
        return next(node for node in self.nodes if node.address == address)

    def load_image(self, tag: str) -> None:
        """The main engine's image ``tag`` into every node (no registry here): saved
        once, loaded into the nodes side by side."""
        if tag in self.loaded:
            return
        with tempfile.TemporaryFile() as saved:
            for chunk in self.main_engine.images.get(tag).save(named=True):
                saved.write(chunk)
            errors: list[BaseException] = []

            def load(node: Node) -> None:
                try:
                    with open(f"/proc/self/fd/{saved.fileno()}", "rb") as data:
                        node.client.images.load(data)
                except BaseException as exc:  # reported below, on the test's thread
                    errors.append(exc)

            threads = [threading.Thread(target=load, args=(node,)) for node in self.nodes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if errors:
            raise errors[0]
        self.loaded.add(tag)


def harness(*args: str, swarm_id: str | None = None) -> subprocess.CompletedProcess[str]:
    """deploy/swarm.py with ``args``, on this run's swarm or on swarm ``swarm_id``."""
    env = {**os.environ, "TRINITY_SWARM_ID": swarm_id} if swarm_id else None
    return subprocess.run(  # noqa: S603 - the project's own script
        [sys.executable, str(REPO / "deploy" / "swarm.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.fixture(scope="session")
def swarm(engine: Any) -> Iterator[Swarm]:
    """Three nodes in a swarm, labelled ``trinity.pool=<node name>``; removed at the
    end, whatever happened."""
    import docker

    if os.geteuid() != 0:
        pytest.skip("a swarm of namespaced engines needs root")
    made = harness("up", "3")
    try:
        if made.returncode != 0:
            pytest.fail(f"deploy/swarm.py up failed: {made.stderr.strip()}")
        described = json.loads(made.stdout)
        nodes = [
            Node(
                name=n["name"],
                role=n["role"],
                address=n["address"],
                socket=n["socket"],
                client=docker.DockerClient(base_url=n["socket"], timeout=120),
            )
            for n in described["nodes"]
        ]
        manager = nodes[0].client
        for node_id in (n["ID"] for n in manager.api.nodes()):
            spec = manager.api.inspect_node(node_id)
            address = spec["Status"]["Addr"]
            name = next(n.name for n in nodes if n.address == address)
            labels = {**(spec["Spec"].get("Labels") or {}), POOL_LABEL: name}
            manager.api.update_node(
                node_id, spec["Version"]["Index"], {**spec["Spec"], "Labels": labels}
            )
        yield Swarm(nodes=nodes, host_address=described["host_address"], main_engine=engine)
    finally:
        harness("down")


@pytest.fixture(scope="session")
def swarm_manager(swarm: Swarm, agent_image: str) -> Any:
    """The manager's client, with the agent image on every node."""
    swarm.load_image(agent_image)
    return swarm.manager


@pytest.fixture(scope="session")
def swarm_socket(swarm: Swarm) -> str:
    """The manager's Unix socket's path (a docker proxy in front of it speaks to it)."""
    return swarm.nodes[0].socket.removeprefix("unix://")


@pytest.fixture(scope="session")
def swarm_network() -> str:
    return NETWORK


def swarm_settings(image: str, manager_socket: str) -> dict[str, Any]:
    """The runtime's settings for these tests (the module docstring says why the
    endpoint is published and the overlay unencrypted)."""
    return {
        "TRINITY_AGENT_BACKEND": "swarm",
        "TRINITY_AGENT_IMAGE": image,
        "TRINITY_SWARM_DOCKER_HOST": manager_socket,
        "TRINITY_SWARM_NETWORK": NETWORK,
        "TRINITY_SWARM_NETWORK_CREATE": True,
        "TRINITY_SWARM_NETWORK_ENCRYPTED": False,
        "TRINITY_SWARM_ENDPOINT": "published",
        "TRINITY_SWARM_CONSTRAINTS": "",
        "TRINITY_SWARM_MEMORY_RESERVATION": "64m",
        "TRINITY_SWARM_CPU_RESERVATION_MILLICORES": 100,
        "TRINITY_AGENT_MEMORY_LIMIT": "1g",
        "TRINITY_AGENT_CPU_MILLICORES": 1500,
        "TRINITY_AGENT_PIDS_LIMIT": 256,
    }


@pytest.fixture(scope="session")
def swarm_simulator(
    swarm: Swarm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimulatorProcess]:
    """The agents' upstream, on the host's address on the swarm's bridge."""
    log = tmp_path_factory.mktemp("swarm-sim") / "simulator.log"
    host = swarm.host_address
    with SimulatorProcess(host=host, log_path=log, control_from=(host,)) as sim:
        yield sim


@pytest.fixture
def swarm_control(
    swarm: Swarm,
    swarm_manager: Any,
    swarm_simulator: SimulatorProcess,
    agent_image: str,
    tmp_path: Path,
) -> Iterator[SimulatorControl]:
    """The platform on the swarm runtime (tests/conftest.py ``platform_on``); the
    agents' services and secrets go at the end."""
    from agents.runtimes.swarm_spec import LABEL

    settings = swarm_settings(agent_image, swarm.nodes[0].socket)
    try:
        with platform_on(swarm_simulator, tmp_path, **settings) as up:
            yield up
    finally:
        for service in swarm.manager.api.services(filters={"label": LABEL}):
            swarm.manager.api.remove_service(service["ID"])
        for secret in swarm.manager.api.secrets(filters={"label": LABEL}):
            swarm.manager.api.remove_secret(secret["ID"])
