"""The compose deployment brought up for real: deploy/compose.yaml with the test's
additions (deploy/compose.test.yaml), on the engine `make test` uses, through Debian's
docker-compose 1.29.

The images are the project's own, built here (deploy/images.py): web, worker, beat,
migrate and docker-proxy from the backend image, the agents from the agent image, and
Postgres and Redis from Debian's packages (trinity-services), as containers on the
stack's own internal network (not the host's services). A provider simulator runs on
the host, on the address the host has on the agents' network; the agent containers
that web starts through docker-proxy reach it there and nothing else.

The test migrates (compose's migrate service), creates an admin and a token in the web
container, registers a plan and an agent over REST, runs a real turn (the real Claude
Code CLI in the agent's container), checks /readyz, and brings the stack down.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from simulator.process import SimulatorProcess
from tests.containers import build_image
from tests.deployed import gateway_message, turn_over_rest, wait_ready

pytestmark = [pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
UP_TIMEOUT = 600
READY_TIMEOUT = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env_file(path: Path) -> Path:
    values = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "TRINITY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": "https://127.0.0.1",
        "DEBUG": "false",
        "TRINITY_HTTPS": "true",
        "POSTGRES_PASSWORD": secrets.token_urlsafe(24),
        "REDIS_PASSWORD": secrets.token_urlsafe(24),
        "TRINITY_METRICS_TOKEN": secrets.token_urlsafe(24),
    }
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


class Stack:
    """docker-compose on this stack's project, files and variables."""

    def __init__(self, *, project: str, env_file: Path, variables: dict[str, str]) -> None:
        compose = shutil.which("docker-compose")
        if compose is None:
            pytest.fail("docker-compose is missing (apt-get install docker-compose)")
        self.command = [
            compose,
            "--project-name",
            project,
            "--env-file",
            str(env_file),
            "-f",
            str(REPO / "deploy" / "compose.yaml"),
            "-f",
            str(REPO / "deploy" / "compose.test.yaml"),
        ]
        self.project = project
        self.env = {**os.environ, **variables}

    def run(self, *args: str, timeout: float = 120) -> str:
        result = subprocess.run(  # noqa: S603 - the project's own compose files
            [*self.command, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(
                f"docker-compose {' '.join(args)} failed: {result.stderr.strip()[-2000:]}\n"
                f"{self.logs()}"
            )
        return result.stdout

    def logs(self) -> str:
        result = subprocess.run(  # noqa: S603
            [*self.command, "logs", "--no-color", "--tail=15"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return result.stdout[-6000:]


@pytest.fixture
def agents_network(engine: Any) -> Iterator[Any]:
    network = engine.networks.create(
        f"trinity-agents-deploy-{os.getpid()}",
        driver="bridge",
        internal=True,
        labels={"trinity.network": "agents"},
    )
    network.reload()
    yield network
    network.reload()
    for container in engine.containers.list(all=True, filters={"network": network.id}):
        container.remove(force=True, v=True)
    network.remove()


def test_the_composed_stack_migrates_and_serves_a_real_turn_over_rest(
    engine: Any,
    agents_network: Any,
    tmp_path: Path,
) -> None:
    for kind in ("backend", "agent", "services"):
        build_image(kind)
    host = os.environ["DOCKER_HOST"]
    if not host.startswith("unix://"):
        pytest.fail(f"the deployment test mounts the engine's socket; DOCKER_HOST is {host}")
    gateway = agents_network.attrs["IPAM"]["Config"][0]["Gateway"]
    port = _free_port()
    with SimulatorProcess(
        host=gateway, control_from=(gateway,), log_path=tmp_path / "simulator.log"
    ) as simulator:
        stack = Stack(
            project=f"trinity-deploy-test-{os.getpid()}",
            env_file=_env_file(tmp_path / "trinity.env"),
            variables={
                "DOCKER_SOCKET": host.removeprefix("unix://"),
                "TRINITY_WEB_PORT": str(port),
                "TRINITY_ENV_FILE": str(tmp_path / "trinity.env"),
                "TRINITY_AGENTS_NETWORK": agents_network.name,
                "TRINITY_TEST_UPSTREAM": simulator.base_url,
            },
        )
        try:
            stack.run("up", "-d", "--no-build", timeout=UP_TIMEOUT)
            _serve_a_turn(stack, simulator, engine, _address(engine, stack, agents_network))
            _serve_through_the_gateway(
                stack, simulator, _address(engine, stack, agents_network, "gateway")
            )
        finally:
            stack.run("down", "--volumes", "--remove-orphans", "--timeout", "5", timeout=300)


def _address(engine: Any, stack: Stack, network: Any, service: str = "web") -> str:
    """A service's address on the agents' network. Every network of the test's stack is
    internal, so published ports lead nowhere; the host reaches web and the gateway on
    that network as it reaches the agents (and as the host's TLS proxy would)."""
    labels = [
        f"com.docker.compose.project={stack.project}",
        f"com.docker.compose.service={service}",
    ]
    (container,) = engine.containers.list(filters={"label": labels})
    return str(container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"])


def _serve_through_the_gateway(stack: Stack, simulator: SimulatorProcess, address: str) -> None:
    """A person's request through the composed gateway, on the plan the turn used."""
    key = stack.run(
        "exec", "-T", "web", "python", "manage.py", "gateway_key", "create",
        "--owner", "admin", "--name", "deploy",
    ).strip().splitlines()[-1]  # fmt: skip
    simulator.control.clear_requests()
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            answer = gateway_message(f"http://{address}:8200", key)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                pytest.fail(f"the gateway did not answer\n{stack.logs()}")
            time.sleep(2)  # polling the composed stack's gateway container
    assert answer.status_code == 200, f"{answer.text}\n{stack.logs()}"
    assert [(r["credential"], r["status"]) for r in simulator.control.requests()] == [
        ("plan-deploy", 200)
    ]


def _serve_a_turn(stack: Stack, simulator: SimulatorProcess, engine: Any, address: str) -> None:
    # What the host's TLS proxy would add: the stack redirects plain HTTP otherwise;
    # the Host header is one ALLOWED_HOSTS lists.
    client = httpx.Client(
        base_url=f"http://{address}:8000",
        headers={"X-Forwarded-Proto": "https", "Host": "localhost"},
        timeout=180,
    )
    wait_ready(client, seconds=READY_TIMEOUT, describe=stack.logs)
    password = secrets.token_urlsafe(16)
    stack.run(
        "exec", "-T", "-e", f"DJANGO_SUPERUSER_PASSWORD={password}", "web",
        "python", "manage.py", "createsuperuser", "--noinput", "--username", "admin",
        "--email", "admin@example.test",
    )  # fmt: skip
    token = stack.run("exec", "-T", "web", "python", "manage.py", "api_token", "admin").strip()
    client.headers["Authorization"] = f"Token {token.splitlines()[-1]}"

    turn_over_rest(
        client, simulator.control, plan="plan-deploy", agent="deploy-bot", describe=stack.logs
    )
    served = [
        (r["credential"], r["status"])
        for r in simulator.control.requests()
        if r["path"] == "/v1/messages" and r["stream"]
    ]
    assert served == [("plan-deploy", 200)]
    # The agent's server ran in its own container, which web created through the proxy.
    (container,) = engine.containers.list(filters={"label": "trinity.agent=deploy-bot"})
    assert container.name == "trinity-agent-deploy-bot"
    assert client.get("/readyz").status_code == 200
