"""The docker runtime end to end on a real engine: each agent's server in its own
container from the agent image, the real Claude Code CLI inside it, the provider
simulator as the upstream. Which credential served is read from the simulator's
request log, and what the engine holds from the engine itself."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import docker.errors
import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from agents.runtimes.base import StartConflict
from agents.runtimes.docker import LABEL, DockerRuntime
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.containers import NETWORK
from tests.execution.support import agent_on, messages_sent, register_plan, task, wait_until
from tests.reach import REFUSED, reach
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def container_of(engine: Any, agent: Agent) -> Any:
    agent.refresh_from_db()
    return engine.containers.get(agent.process_handle)


def containers_labelled(engine: Any, name: str) -> list[Any]:
    return list(engine.containers.list(all=True, filters={"label": f"{LABEL}={name}"}))


def test_a_turn_is_served_in_the_agents_container_and_a_walk_commits_a_hot_reloaded_switch(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(docker_control, "plan-a")
    b, _ = register_plan(docker_control, "plan-b")
    agent = agent_on(owner, a)

    body = task(owner_client)
    assert body["http_status"] == 200, body
    assert messages_sent(docker_control) == [("plan-a", 200)]
    container = container_of(engine, agent)
    assert container.status == "running"
    assert container.name == "trinity-agent-bot" and container.labels[LABEL] == "bot"

    docker_control.clear_requests()
    docker_control.set_usage(a_token, "five_hour", percent=100)
    body = task(owner_client)
    assert body["http_status"] == 200, body
    assert messages_sent(docker_control) == [("plan-a", 429), ("plan-b", 200)]
    assert body["subscription_switch"]["committed"] and body["subscription_switch"]["to"] == b.pk
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk

    # The committed switch was hot-reloaded into the same running container.
    assert container_of(engine, agent).id == container.id
    docker_control.clear_requests()
    assert task(owner_client)["http_status"] == 200
    assert messages_sent(docker_control) == [("plan-b", 200)]


def _claude_running(container: Any) -> bool:
    container.reload()
    if container.status != "running":
        return False
    processes = container.top(ps_args="-eo pid,args").get("Processes") or []
    return any("claude" in " ".join(row) for row in processes)


def test_a_container_killed_mid_turn_fails_the_turn_switches_nothing_and_the_next_turn_revives_it(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(docker_control, "plan-a")
    register_plan(docker_control, "plan-b")
    agent = agent_on(owner, a)
    lifecycle.agent_start(agent=agent)
    container = container_of(engine, agent)
    docker_control.set_latency(20_000)

    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result.update(task(owner_client))
        finally:
            connection.close()

    turn = threading.Thread(target=run)
    turn.start()
    wait_until(lambda: _claude_running(container), seconds=60, what="the CLI in the container")
    container.kill()
    turn.join(timeout=120)
    assert not turn.is_alive()
    assert result["http_status"] == 503 and result["error_code"] == "container_fault", result
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk
    assert not Notification.objects.filter(kind="subscription_switched").exists()
    assert not RateLimitEvent.objects.exists()

    docker_control.set_latency(0)
    docker_control.clear_requests()
    body = task(owner_client)
    assert body["http_status"] == 200, (body.get("error_code"), body.get("error_detail"))
    assert messages_sent(docker_control) == [("plan-a", 200)]
    assert container_of(engine, agent).status == "running"
    assert len(containers_labelled(engine, "bot")) == 1


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, each on its own thread and database connection; their
    results (or the exception each raised) in order."""
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = calls[index]()
        except Exception as exc:  # noqa: BLE001 - the race's outcome is what is asserted
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    return results


def test_two_racing_starts_make_one_container_and_the_loser_gets_the_winners_endpoint(
    docker_control: SimulatorControl, engine: Any, owner: User
) -> None:
    a, _ = register_plan(docker_control, "plan-a")
    agent = agent_on(owner, a)
    # The runtime alone: the engine's name is the claim, and the loser creates nothing.
    _, spec = lifecycle.spawn_spec(agent)
    runtime = DockerRuntime()
    first, second = _race(lambda: runtime.start(spec), lambda: runtime.start(spec))
    outcomes = sorted(type(x).__name__ for x in (first, second))
    assert outcomes == ["Spawned", "StartConflict"], (first, second)
    assert len(containers_labelled(engine, "bot")) == 1
    winner = first if not isinstance(first, StartConflict) else second
    runtime.stop(name="bot", handle=winner.handle)
    assert containers_labelled(engine, "bot") == []

    # Through the lifecycle: both callers come back with the one recorded server.
    one, two = _race(
        lambda: lifecycle.agent_start(agent=agent), lambda: lifecycle.agent_start(agent=agent)
    )
    assert isinstance(one, Agent) and isinstance(two, Agent), (one, two)
    assert (one.endpoint, one.process_handle) == (two.endpoint, two.process_handle)
    (container,) = containers_labelled(engine, "bot")
    assert container.id == one.process_handle


def test_deleting_the_agent_removes_its_container_and_whatever_it_held(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(docker_control, "plan-a")
    agent = agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200
    handle = container_of(engine, agent).id

    assert owner_client.delete("/api/agents/bot").status_code == 204
    assert containers_labelled(engine, "bot") == []
    with pytest.raises(docker.errors.NotFound):
        engine.containers.get(handle)
    # The container's file system (its server's home, the token it held in memory
    # and any file of it) went with it: no volume of it is left either.
    assert [v for v in engine.volumes.list() if handle in str(v.attrs.get("UsageData"))] == []


def test_the_containers_limits_come_from_settings_and_show_in_docker_inspect(
    docker_control: SimulatorControl, engine: Any, owner: User
) -> None:
    a, _ = register_plan(docker_control, "plan-a")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    host = engine.api.inspect_container(agent.process_handle)["HostConfig"]
    assert host["Memory"] == 1024**3
    assert host["NanoCpus"] == 1_500_000_000
    assert host["PidsLimit"] == 256
    assert host["RestartPolicy"]["Name"] == "no"


def test_the_platform_reaches_the_server_only_on_the_agents_network_and_the_agent_reaches_no_store(
    docker_control: SimulatorControl, engine: Any, owner: User, container_simulator: Any
) -> None:
    a, _ = register_plan(docker_control, "plan-a")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    attrs = engine.api.inspect_container(agent.process_handle)
    networks = attrs["NetworkSettings"]["Networks"]
    assert list(networks) == [NETWORK]
    assert agent.endpoint == f"http://{networks[NETWORK]['IPAddress']}:8080"
    assert attrs["HostConfig"]["PortBindings"] in (None, {})
    network = engine.networks.get(NETWORK)
    assert network.attrs["Internal"] is True
    assert network.attrs["Labels"] == {"trinity.network": "agents"}

    # From inside, as the agent's own user (what the CLI's tools run as): Postgres and
    # Redis are not reachable at any address the container can name, nor, by the egress
    # guard, the host's one service on the network (the upstream, which the CLI reaches
    # through its server's forwarder on loopback) or another agent's server.
    other = lifecycle.agent_start(agent=agent_on(owner, a, name="other"))
    gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
    upstream = f"{gateway}:{container_simulator.base_url.rsplit(':', 1)[1]}"
    server = other.endpoint.removeprefix("http://")
    stores = [f"{gateway}:5432", f"{gateway}:6379", "127.0.0.1:5432", "127.0.0.1:6379"]
    container = engine.containers.get(agent.process_handle)
    assert reach(container, "trinity-agent", [*stores, upstream, server]) == [REFUSED] * 6
    # Root in the same container (the server and its forwarder) reaches both, so the
    # probe can tell, and the guard is what closes them.
    assert reach(container, "root", [upstream, server]) == ["open", "open"]


READ = """
import sys
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            f.read(1)
        print(path, "readable")
    except OSError as exc:
        print(path, "refused", type(exc).__name__)
"""


def test_the_agents_user_in_the_container_cannot_read_what_the_server_holds(
    docker_control: SimulatorControl, engine: Any, owner: User
) -> None:
    """The server (PID 1, root) holds the plan token in its environment and memory; the
    CLI and its tools run as trinity-agent, which can read neither, nor the server's
    own directory, while its own work area is its to use."""
    a, token = register_plan(docker_control, "plan-a")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    # The server reports its own user (no sandbox inside the container); the platform
    # records the container that contains it, and the panel warns of nothing.
    assert agent.isolation == "container"
    container = engine.containers.get(agent.process_handle)
    code, output = container.exec_run(["id", "-un"], user="trinity-agent")
    assert (code, output.decode().strip()) == (0, "trinity-agent")
    paths = ["/proc/1/environ", "/proc/1/mem", "/home/agent/work/.env", "/proc/self/status"]
    code, output = container.exec_run(["python3", "-c", READ, *paths], user="trinity-agent")
    lines = [line.split() for line in output.decode().splitlines()]
    assert code == 0, lines
    assert [(line[0], line[1]) for line in lines] == [
        ("/proc/1/environ", "refused"),
        ("/proc/1/mem", "refused"),
        ("/home/agent/work/.env", "refused"),
        ("/proc/self/status", "readable"),
    ]
    # And the token is there to be protected: root in the container sees it.
    code, output = container.exec_run(["cat", "/proc/1/environ"])
    assert code == 0 and token.encode() in output
