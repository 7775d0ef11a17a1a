"""The stack file brought up for real: deploy/stack.yaml with the test's additions
(deploy/stack.test.yaml), by ``docker stack deploy`` on the three-node swarm of
tests/swarm/conftest.py.

Everything the platform runs is the stack's: Postgres and Redis (Debian's packages,
trinity-services), migrate, docker-proxy on the manager with the manager's socket,
web, worker, beat and the gateway, their secrets swarm secrets. The platform's services
are placed on the manager (the only node the backend image is loaded into); the
agents' services, which web creates through docker-proxy, on a worker node
(TRINITY_SWARM_CONSTRAINTS), so the turn crosses nodes on the agents' overlay.

The test creates an admin and a token inside web's task, registers a plan on the
provider simulator and an agent over REST on web's published port, runs a real turn
(the real Claude Code CLI in the agent's service), deletes the agent, then removes the
stack and waits until nothing of it is left on any node.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from simulator.process import SimulatorProcess
from tests.containers import build_image
from tests.deployed import gateway_message, turn_over_rest, wait_ready
from tests.swarm.conftest import REPO, Node, Swarm

pytestmark = [pytest.mark.e2e]

STACK = "trstack"
NAMESPACE = "com.docker.stack.namespace"
AGENTS_NETWORK = f"trinity-agents-stack-{os.getpid()}"
DATA_LABEL = "trinity.data"
AGENT_LABEL = "trinity.agent"
AGENT = "stack-bot"
# The secrets deploy/stack.yaml takes (external: created before the deploy).
STACK_SECRETS = (
    "trinity_postgres_password",
    "trinity_redis_password",
    "trinity_database_url",
    "trinity_redis_url",
    "trinity_secret_key",
    "trinity_encryption_keys",
    "trinity_metrics_token",
)
DEPLOY_TIMEOUT = 180
READY_TIMEOUT = 300
GONE_TIMEOUT = 120
WEB_PORT = 8000
GATEWAY_PORT = 8200


def _load_on(node: Node, main_engine: Any, tag: str) -> None:
    """The main engine's image into one node, unless that node holds it already."""
    import docker.errors

    wanted = main_engine.images.get(tag)
    try:
        if node.client.images.get(tag).id == wanted.id:
            return
    except docker.errors.ImageNotFound:
        pass
    # Streamed from one engine to the other: neither memory nor disk holds it whole.
    node.client.images.load(wanted.save(named=True))


def _secrets() -> dict[str, str]:
    """The values of STACK_SECRETS, as `docker secret create` would hold them."""
    postgres, redis = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    values = {
        "trinity_postgres_password": postgres,
        "trinity_redis_password": redis,
        "trinity_database_url": f"postgres://trinity:{postgres}@postgres:5432/trinity",
        "trinity_redis_url": f"redis://:{redis}@redis:6379/0",
        "trinity_secret_key": secrets.token_urlsafe(50),
        "trinity_encryption_keys": Fernet.generate_key().decode(),
        "trinity_metrics_token": secrets.token_urlsafe(24),
    }
    assert tuple(values) == STACK_SECRETS
    return values


def _env_file(path: Path) -> Path:
    """The settings the stack reads from its env file: none of the secrets."""
    values = {
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": "https://localhost",
        "DEBUG": "false",
        # The agents run on the workers: the turn crosses nodes on the overlay.
        "TRINITY_SWARM_CONSTRAINTS": "node.role==worker",
        "TRINITY_SWARM_MEMORY_RESERVATION": "64m",
        "TRINITY_SWARM_CPU_RESERVATION_MILLICORES": "100",
        "TRINITY_AGENT_MEMORY_LIMIT": "1g",
        "TRINITY_AGENT_CPU_MILLICORES": "1500",
        "TRINITY_AGENT_PIDS_LIMIT": "256",
    }
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


def _label_data_node(manager: Any, value: str | None) -> None:
    """Set (or, with None, remove) the label that places Postgres and Redis."""
    node_id = manager.api.info()["Swarm"]["NodeID"]
    spec = manager.api.inspect_node(node_id)
    labels = dict(spec["Spec"].get("Labels") or {})
    labels.pop(DATA_LABEL, None)
    if value is not None:
        labels[DATA_LABEL] = value
    manager.api.update_node(node_id, spec["Version"]["Index"], {**spec["Spec"], "Labels": labels})


class Stack:
    """`docker stack` on the swarm's manager, with the test's files and variables."""

    def __init__(self, swarm: Swarm, variables: dict[str, str]) -> None:
        docker = shutil.which("docker")
        if docker is None:
            pytest.fail("the docker client is missing (deploy/engine.py installs docker.io)")
        self.docker = docker
        self.swarm = swarm
        self.env = {**os.environ, **variables, "DOCKER_HOST": swarm.nodes[0].socket}

    def run(self, *args: str, timeout: float = DEPLOY_TIMEOUT) -> str:
        result = subprocess.run(  # noqa: S603 - the engine's own client
            [self.docker, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(f"docker {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")
        return result.stdout

    def deploy(self) -> None:
        self.run(
            "stack", "deploy", "--resolve-image", "never",
            "-c", str(REPO / "deploy" / "stack.yaml"),
            "-c", str(REPO / "deploy" / "stack.test.yaml"),
            STACK,
        )  # fmt: skip

    def container(self, service: str) -> Any:
        """The running container of the stack's ``service`` on the manager."""
        selector = {"label": f"com.docker.swarm.service.name={STACK}_{service}"}
        running = self.swarm.manager.containers.list(filters=selector)
        if not running:
            pytest.fail(f"no running {service} task on the manager\n{self.state()}")
        return running[0]

    def manage(self, *argv: str, environment: dict[str, str] | None = None) -> str:
        """``python manage.py ...`` inside web's task; its last line of output."""
        code, output = self.container("web").exec_run(
            ["python", "manage.py", *argv], environment=environment or {}
        )
        text = output.decode(errors="replace").strip()
        assert code == 0, f"manage.py {argv[0]} failed: {text[-2000:]}"
        return text.splitlines()[-1]

    def state(self) -> str:
        """Each of the stack's tasks, its node's name and state: for a failure's message."""
        lines = []
        for service in self.swarm.manager.api.services(filters={"label": f"{NAMESPACE}={STACK}"}):
            for found in self.swarm.manager.api.tasks(filters={"service": service["ID"]}):
                status = found["Status"]
                lines.append(
                    f"{service['Spec']['Name']}: {status['State']} {status.get('Err', '')}"
                )
        return "\n".join(sorted(lines))

    def leftovers(self) -> list[str]:
        """What of the stack any node still holds: services, containers, networks."""
        selector = {"label": f"{NAMESPACE}={STACK}"}
        manager = self.swarm.manager
        found = [s["Spec"]["Name"] for s in manager.api.services(filters=selector)]
        found += [n["Name"] for n in manager.api.networks(filters=selector)]
        for node in self.swarm.nodes:
            # One listing call: the high-level list inspects each container after, and
            # one the node removes meanwhile would fail it.
            listed = node.client.api.containers(all=True, filters=selector)
            found += [c["Names"][0].lstrip("/") for c in listed]
        return found


def _remove_everything(stack: Stack) -> None:
    """Whatever a failed run left: the agents' services, the stack, then its volumes,
    secrets, the agents' network and the data label, once no container holds them."""
    import docker.errors

    manager = stack.swarm.manager
    ours = {"label": f"{AGENT_LABEL}={AGENT}"}
    for service in manager.api.services(filters=ours):
        manager.api.remove_service(service["ID"])
    subprocess.run(  # noqa: S603
        [stack.docker, "stack", "rm", STACK], env=stack.env, capture_output=True, check=False
    )
    deadline = time.monotonic() + GONE_TIMEOUT
    while stack.leftovers() and time.monotonic() < deadline:
        time.sleep(1)  # the nodes stop the stack's containers
    ours_too = [s for s in manager.api.secrets() if s["Spec"]["Name"] in STACK_SECRETS]
    for secret in manager.api.secrets(filters=ours) + ours_too:
        manager.api.remove_secret(secret["ID"])
    for volume in manager.volumes.list(filters={"label": f"{NAMESPACE}={STACK}"}):
        volume.remove(force=True)
    for network in manager.networks.list(names=[AGENTS_NETWORK]):
        try:
            network.remove()
        except docker.errors.APIError:
            pass  # its agents' tasks still stop; deploy/swarm.py down takes it with the node
    _label_data_node(manager, None)


@pytest.fixture
def stack(
    swarm: Swarm,
    swarm_simulator: SimulatorProcess,
    engine: Any,
    agent_image: str,
    tmp_path: Path,
) -> Iterator[Stack]:
    """The stack's images on the nodes that run them, its secrets, its agents' network
    and the data node's label; everything removed at the end."""
    # The platform's images into the manager while the agent image goes to every node.
    with ThreadPoolExecutor() as loading:
        loads = [
            loading.submit(_load_on, swarm.nodes[0], engine, build_image(kind))
            for kind in ("backend", "services")
        ]
        swarm.load_image(agent_image)
        for load in loads:
            load.result()
    manager = swarm.manager
    ready = Stack(
        swarm,
        {
            "TRINITY_ENV_FILE": str(_env_file(tmp_path / "trinity.env")),
            "TRINITY_AGENTS_NETWORK": AGENTS_NETWORK,
            "TRINITY_TEST_UPSTREAM": swarm_simulator.base_url,
            "DOCKER_SOCKET": swarm.nodes[0].socket.removeprefix("unix://"),
        },
    )
    _remove_everything(ready)  # a run killed before its own cleanup
    try:
        _label_data_node(manager, "true")
        for name, value in _secrets().items():
            manager.api.create_secret(name, value.encode())
        # Unencrypted (the conftest says why); not internal: the agents' way to the
        # simulator is their node's docker_gwbridge, then the swarm's bridge.
        manager.networks.create(AGENTS_NETWORK, driver="overlay", labels={"trinity.test": STACK})
        yield ready
    finally:
        _remove_everything(ready)


def _running(stack: Stack) -> dict[str, int]:
    """Running tasks per service of the stack, and migrate's completed ones."""
    manager = stack.swarm.manager
    counts: dict[str, int] = {}
    for service in manager.api.services(filters={"label": f"{NAMESPACE}={STACK}"}):
        name = service["Spec"]["Name"].removeprefix(f"{STACK}_")
        tasks = manager.api.tasks(filters={"service": service["ID"]})
        states = [t["Status"]["State"] for t in tasks]
        wanted = "complete" if name == "migrate" else "running"
        counts[name] = states.count(wanted)
    return counts


def _wait_converged(stack: Stack) -> None:
    """Every service's tasks running and healthy (a task is "starting" until its
    healthcheck first passes), beat exactly one, migrate done once."""
    wanted = {
        "postgres": 1, "redis": 1, "docker-proxy": 1, "migrate": 1,
        "web": 1, "worker": 2, "beat": 1, "gateway": 1,
    }  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT
    while _running(stack) != wanted:
        if time.monotonic() > deadline:
            assert _running(stack) == wanted, stack.state()
        time.sleep(2)  # the worker's first healthcheck runs 30 s after it starts


def _serve_a_turn(
    stack: Stack, swarm: Swarm, simulator: SimulatorProcess, client: httpx.Client
) -> None:
    """An admin made in web's task, a plan and an agent over REST, a real turn."""
    stack.manage(
        "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.test",
        environment={"DJANGO_SUPERUSER_PASSWORD": secrets.token_urlsafe(16)},
    )  # fmt: skip
    client.headers["Authorization"] = f"Token {stack.manage('api_token', 'admin')}"
    simulator.control.clear_requests()
    turn_over_rest(client, simulator.control, plan="plan-stack", agent=AGENT, describe=stack.state)
    served = [
        (r["credential"], r["status"])
        for r in simulator.control.requests()
        if r["path"] == "/v1/messages" and r["stream"]
    ]
    assert served == [("plan-stack", 200)]
    # The agent's server is a service web created through docker-proxy, its task on a
    # worker node: web reached it across nodes by its name on the agents' overlay.
    (service,) = swarm.manager.api.services(filters={"label": f"{AGENT_LABEL}={AGENT}"})
    assert service["Spec"]["Name"] == f"trinity-agent-{AGENT}"
    (running,) = swarm.manager.api.tasks(
        filters={"service": service["ID"], "desired-state": "running"}
    )
    assert swarm.node_of(running["NodeID"]).role == "worker"


def _serve_through_the_gateway(stack: Stack, swarm: Swarm, simulator: SimulatorProcess) -> None:
    """A person's request through the stack's gateway, on the plan the turn used."""
    key = stack.manage("gateway_key", "create", "--owner", "admin", "--name", "stack")
    simulator.control.clear_requests()
    answer = gateway_message(f"http://{swarm.nodes[0].address}:{GATEWAY_PORT}", key)
    assert answer.status_code == 200, f"{answer.text}\n{stack.state()}"
    assert [(r["credential"], r["status"]) for r in simulator.control.requests()] == [
        ("plan-stack", 200)
    ]


def _delete_the_agent(client: httpx.Client, swarm: Swarm) -> None:
    """DELETE over REST removes the agent's service and its secret (through the proxy)."""
    response = client.delete(f"/api/agents/{AGENT}")
    assert response.status_code == 204, response.text
    selector = {"label": f"{AGENT_LABEL}={AGENT}"}
    assert swarm.manager.api.services(filters=selector) == []
    assert swarm.manager.api.secrets(filters=selector) == []


def test_the_stack_deploys_serves_a_real_turn_and_goes_without_a_trace(
    stack: Stack, swarm: Swarm, swarm_simulator: SimulatorProcess
) -> None:
    stack.deploy()
    # What the host's TLS proxy would add: the stack redirects plain HTTP otherwise.
    client = httpx.Client(
        base_url=f"http://{swarm.nodes[0].address}:{WEB_PORT}",
        headers={"X-Forwarded-Proto": "https", "Host": "localhost"},
        timeout=180,
    )
    wait_ready(client, seconds=READY_TIMEOUT, describe=stack.state)
    _wait_converged(stack)

    _serve_a_turn(stack, swarm, swarm_simulator, client)
    _serve_through_the_gateway(stack, swarm, swarm_simulator)
    _delete_the_agent(client, swarm)

    stack.run("stack", "rm", STACK)
    deadline = time.monotonic() + GONE_TIMEOUT
    while stack.leftovers() and time.monotonic() < deadline:
        time.sleep(1)  # the nodes stop the stack's containers
    assert stack.leftovers() == []
