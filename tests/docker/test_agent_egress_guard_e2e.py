"""The agent image's server takes its environment from a secret file and guards egress.

What a swarm service of an agent is, on the real engine with the agent image: the
capabilities both container runtimes give (CAPABILITIES, plus NET_ADMIN and SETPCAP
for the guard), a read-only root, no `no-new-privileges` option (a swarm
service cannot ask for it), the environment in a root-only file mounted where swarm
mounts secrets and only its path in the container's environment. The peers are real:
another container on the same network and a listener on the network's gateway (the
host). Probes run as the agent user and as root inside the container (docker exec);
the kernel's word on the server is its /proc/1/status.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker.types import Mount

from agents.client import AgentServerClient, AgentServerUnavailable
from agents.runtimes.docker import (
    CAPABILITIES,
    GUARD_CAPABILITIES,
    SERVER_HOME,
    TMPFS,
    WORK_AREA,
)
from tests.containers import NETWORK
from tests.proc_status import cap_mask, proc_status
from tests.reach import REFUSED, reach
from trinity.crypto import Secret

pytestmark = [pytest.mark.e2e]

ENV_FILE = "/run/secrets/trinity-agent-env"
GUARDED = (*CAPABILITIES, *GUARD_CAPABILITIES)
PORT = 8080
PEER_PORT = 8000
BOOT_SECONDS = 60.0
RESOLVE = "import socket, sys; print(socket.gethostbyname(sys.argv[1]))"


def _address(container: Any) -> str:
    container.reload()
    return str(container.attrs["NetworkSettings"]["Networks"][NETWORK]["IPAddress"])


def _env_file(directory: Path, secret: str) -> Path:
    """The server's baseline environment as the swarm runtime writes it: JSON, root's, 0400."""
    path = directory / "trinity-agent-env"
    values = {
        "TRINITY_AGENT_SECRET": secret,
        "TRINITY_AGENT_RUNTIME": "claude-code",
        "TRINITY_AGENT_NAME": "guarded",
    }
    path.write_text(json.dumps(values))
    os.chmod(path, 0o400)
    return path


@contextlib.contextmanager
def _agent(
    engine: Any,
    image: str,
    directory: Path,
    capabilities: tuple[str, ...] = GUARDED,
    allow: str = "",
) -> Iterator[tuple[Any, str]]:
    """The agent's container with the guard asked for, its secret in a root-only file
    under ``directory``; (container, its secret). Removed afterwards."""
    secret = f"guard-test-secret-{secrets.token_hex(16)}"
    env_file = _env_file(directory, secret)
    container = engine.containers.run(
        image=image,
        name=f"trinity-guard-test-{secrets.token_hex(4)}",
        environment={
            "TRINITY_AGENT_ENV_FILE": ENV_FILE,
            "TRINITY_AGENT_EGRESS_GUARD": "1",
            "TRINITY_AGENT_HOME": SERVER_HOME,
            **({"TRINITY_AGENT_EGRESS_ALLOW": allow} if allow else {}),
        },
        detach=True,
        network=NETWORK,
        cap_drop=["ALL"],
        cap_add=list(capabilities),
        read_only=True,
        tmpfs=dict(TMPFS),
        mounts=[
            Mount(target=WORK_AREA, source=None, type="volume"),
            Mount(target=ENV_FILE, source=str(env_file), type="bind", read_only=True),
        ],
    )
    try:
        yield container, secret
    finally:
        container.remove(force=True, v=True)


def _proven(container: Any, secret: str) -> dict[str, Any]:
    """The server's /health, once it proves it holds `secret` (agents/client.py)."""
    client = AgentServerClient(
        endpoint=f"http://{_address(container)}:{PORT}",
        secret=Secret(secret),
        handle=str(container.id),
    )
    deadline = time.monotonic() + BOOT_SECONDS
    while True:
        try:
            return client.prove(timeout=2.0)
        except AgentServerUnavailable:
            container.reload()
            if container.status == "exited" or time.monotonic() > deadline:
                pytest.fail(f"the agent server did not come up: {container.logs().decode()}")
            time.sleep(0.5)  # the server binds a moment after the container starts


@pytest.fixture
def peer(engine: Any, agent_image: str, gateway: str) -> Iterator[Any]:
    """Another container on the agents' network, serving HTTP on PEER_PORT."""
    container = engine.containers.run(
        image=agent_image,
        name=f"trinity-guard-peer-{secrets.token_hex(4)}",
        command=["python", "-m", "http.server", str(PEER_PORT)],
        detach=True,
        network=NETWORK,
        cap_drop=["ALL"],
        read_only=True,
    )
    try:
        yield container
    finally:
        container.remove(force=True, v=True)


@pytest.fixture
def gateway_listener(gateway: str) -> Iterator[int]:
    """A TCP listener of the host's on the network's gateway address; its port."""
    server = socket.create_server((gateway, 0))
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


@pytest.fixture
def guarded(
    engine: Any, agent_image: str, gateway: str, tmp_path: Path
) -> Iterator[tuple[Any, str]]:
    """The agent's container with the guard asked for; (container, its secret)."""
    with _agent(engine, agent_image, tmp_path) as made:
        yield made


def test_the_agent_user_reaches_loopback_and_no_private_address_while_root_does(
    guarded: tuple[Any, str], peer: Any, gateway: str, gateway_listener: int
) -> None:
    container, secret = guarded
    health = _proven(container, secret)
    assert health["egress_guard"] is True and health["isolation"] == "separate-user", health
    # Nothing secret in what the engine shows of the container: only the file's path.
    env = container.attrs["Config"]["Env"]
    assert f"TRINITY_AGENT_ENV_FILE={ENV_FILE}" in env
    assert not [item for item in env if secret in item or item.startswith("TRINITY_AGENT_SEC")]

    # The peer and the host's listener on the gateway: refused at once (REJECT).
    targets = [f"{_address(peer)}:{PEER_PORT}", f"{gateway}:{gateway_listener}"]
    assert reach(container, "root", targets) == ["open", "open"]
    assert reach(container, "trinity-agent", targets) == [REFUSED, REFUSED]
    # Loopback stays open to the agent user (the server, its forwarder), and so does
    # the engine's DNS at 127.0.0.11: it resolves the peer it may not reach.
    assert reach(container, "trinity-agent", [f"127.0.0.1:{PORT}"]) == ["open"]
    code, output = container.exec_run(["python", "-c", RESOLVE, peer.name], user="trinity-agent")
    assert (code, output.decode().strip()) == (0, _address(peer)), output
    # IPv6 (the kernel has it, the network hands out none): nothing but loopback.
    code, output = container.exec_run(["ip6tables", "-S", "TRINITY-AGENT-EGRESS"])
    assert code == 0 and output.decode().split("\n")[1:] == [
        "-A TRINITY-AGENT-EGRESS -o lo -j RETURN",
        "-A TRINITY-AGENT-EGRESS -j REJECT --reject-with icmp6-port-unreachable",
        "",
    ], output


def test_the_operators_allowance_opens_exactly_its_address_and_port(
    engine: Any, agent_image: str, peer: Any, gateway: str, gateway_listener: int, tmp_path: Path
) -> None:
    """A private service the agents' tools need (here the peer's port) is let through
    by TRINITY_AGENT_EGRESS_ALLOW; an allowance of another port of the gateway leaves
    the gateway's listener refused."""
    server = f"{_address(peer)}:{PEER_PORT}"
    allow = f"{server},{gateway}:{gateway_listener + 1 if gateway_listener < 65535 else 1}"
    with _agent(engine, agent_image, tmp_path, allow=allow) as (container, secret):
        _proven(container, secret)
        listener = f"{gateway}:{gateway_listener}"
        assert reach(container, "trinity-agent", [server, listener]) == ["open", REFUSED]
        assert reach(container, "root", [listener]) == ["open"]
        assert (
            f"egress_guard=on (allowing {_address(peer)}/32:{PEER_PORT},"
            in container.logs(stderr=True).decode()
        )


def test_the_server_keeps_neither_net_admin_nor_setpcap_and_sets_no_new_privs(
    guarded: tuple[Any, str],
) -> None:
    container, secret = guarded
    _proven(container, secret)
    code, output = container.exec_run(["cat", "/proc/1/status"])
    assert code == 0, output
    status = proc_status(output.decode())
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == cap_mask(CAPABILITIES)
    assert (status["CapInh"], status["CapAmb"]) == ("0" * 16, "0" * 16), status
    # No engine option set it (a swarm service has none): the server did.
    assert status["NoNewPrivs"] == "1", status
    assert "no-new-privileges" not in str(container.attrs["HostConfig"]["SecurityOpt"])


@pytest.mark.parametrize(
    ("missing", "step"),
    [
        ("NET_ADMIN", "egress guard: iptables rules: iptables-restore refused them"),
        ("SETPCAP", "egress guard: bounding set: dropping CAP_NET_ADMIN needs CAP_SETPCAP"),
    ],
)
def test_a_guard_that_cannot_be_installed_stops_the_container_naming_the_step(
    engine: Any, agent_image: str, gateway: str, tmp_path: Path, missing: str, step: str
) -> None:
    capabilities = tuple(name for name in GUARDED if name != missing)
    with _agent(engine, agent_image, tmp_path, capabilities) as (container, secret):
        exit_code = container.wait(timeout=BOOT_SECONDS)["StatusCode"]
        logs = container.logs().decode()
    assert exit_code == 2, logs
    assert f"agent server: refusing to start: {step}" in logs, logs
    assert "listening" not in logs and secret not in logs
