"""The container tests' fixtures (a plugin of tests/conftest.py, for tests/docker and
tests/deploy): the engine `make test` found or started (deploy/engine.py), the agent
image built FROM the Debian base (deploy/images.py), a network the runtime
itself creates for agents, and a provider simulator the containers reach on that
network's gateway.

The network is internal: nothing in it has a way out but to the host's address on its
bridge, where the simulator (and nothing else of the platform's) listens. Postgres and
Redis listen on the host's loopback only, which no container reaches.

Nothing is mocked here. Without an engine these tests skip, saying so; with CI=true
that skip fails the run (tests/skip_policy.py), like a missing Postgres or Redis.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.conftest import platform_on

REPO = Path(__file__).resolve().parents[1]
# One network per run: a second run on the same engine (or a leftover) never shares it.
NETWORK = f"trinity-agents-test-{os.getpid()}"


@pytest.fixture(scope="session")
def engine() -> Any:
    """The docker SDK's client of the engine DOCKER_HOST names (deploy/engine.py)."""
    import docker
    import docker.errors

    if not os.environ.get("DOCKER_HOST"):
        pytest.skip("no Docker engine: deploy/engine.py up found or started none")
    client = docker.from_env(timeout=120)
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"the Docker engine at DOCKER_HOST does not answer: {exc}")
    return client


def build_image(kind: str) -> str:
    """Build one of the project's images with deploy/images.py; its tag. Fails naming
    the build's log."""
    result = subprocess.run(  # noqa: S603 - the project's own script
        [sys.executable, str(REPO / "deploy" / "images.py"), kind],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"building the {kind} image failed: {result.stderr.strip()}")
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def agent_image(engine: Any) -> str:
    return build_image("agent")


def docker_settings(image: str) -> dict[str, Any]:
    """The runtime's settings for these tests: the platform runs on the host, so it
    reaches each server by its address on the agents' network."""
    return {
        "TRINITY_AGENT_BACKEND": "docker",
        "TRINITY_AGENT_IMAGE": image,
        "TRINITY_DOCKER_NETWORK": NETWORK,
        "TRINITY_DOCKER_ENDPOINT": "address",
        "TRINITY_DOCKER_NETWORK_CREATE": True,
        "TRINITY_DOCKER_NETWORK_INTERNAL": True,
        "TRINITY_AGENT_MEMORY_LIMIT": "1g",
        "TRINITY_AGENT_CPU_MILLICORES": 1500,
        "TRINITY_AGENT_PIDS_LIMIT": 256,
    }


@pytest.fixture(scope="session")
def gateway(engine: Any, agent_image: str) -> Iterator[str]:
    """The agents' network, created by the runtime's own agents_network; yields the
    host's address on it. Every container on it and the network go at the end."""
    from agents.runtimes.docker import agents_network

    with override_settings(**docker_settings(agent_image)):
        network = engine.networks.get(agents_network(engine))
    try:
        yield network.attrs["IPAM"]["Config"][0]["Gateway"]
    finally:
        network.reload()
        for container in engine.containers.list(all=True, filters={"network": network.id}):
            container.remove(force=True, v=True)
        network.remove()


@pytest.fixture(scope="session")
def container_simulator(
    gateway: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimulatorProcess]:
    """A simulator on the host's address on the agents' network: the containers'
    upstream. The host controls it from that address, which no container has."""
    log = tmp_path_factory.mktemp("sim") / "simulator.log"
    with SimulatorProcess(host=gateway, log_path=log, control_from=(gateway,)) as sim:
        yield sim


@pytest.fixture
def docker_control(
    container_simulator: SimulatorProcess, agent_image: str, engine: Any, tmp_path: Path
) -> Iterator[SimulatorControl]:
    """The platform on the docker runtime with the container simulator as its upstream
    (tests/conftest.py ``platform_on``). The agents' containers go at the end."""
    from agents.runtimes.docker import LABEL

    try:
        with platform_on(container_simulator, tmp_path, **docker_settings(agent_image)) as up:
            yield up
    finally:
        on_network = {"label": LABEL, "network": NETWORK}
        for container in engine.containers.list(all=True, filters=on_network):
            container.remove(force=True, v=True)
