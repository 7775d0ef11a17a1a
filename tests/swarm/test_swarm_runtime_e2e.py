"""The swarm runtime end to end on a real swarm of three nodes (tests/swarm/conftest.py):
each agent a service on some node running the agent image, the real Claude Code CLI
inside it, the provider simulator as the upstream. Which credential served is read
from the simulator's request log, where each agent runs from the manager, and what a
task's container holds from its node's engine.

The node-loss test kills a worker node and brings it back at the end (the harness's
``revive``), so the tests after it, in any order, find three nodes again.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from agents.runtimes.base import SpawnSpec, StartConflict
from agents.runtimes.docker import CAPABILITIES
from agents.runtimes.swarm import SwarmRuntime, agents_overlay
from agents.runtimes.swarm_spec import LABEL
from agents.runtimes.swarm_tasks import newest_task
from simulator.control import SimulatorControl
from tests.execution.support import agent_on, messages_sent, register_plan, task, wait_until
from tests.proc_status import cap_mask, proc_status
from tests.reach import REFUSED, reach
from tests.swarm.conftest import POOL_LABEL, Node, Swarm, harness
from trinity.crypto import Secret

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def placed(swarm: Swarm, agent: Agent) -> tuple[Node, Any]:
    """The node the agent's task runs on, and its container there."""
    agent.refresh_from_db()
    found = newest_task(swarm.manager, agent.process_handle)
    assert found is not None and found["Status"]["State"] == "running", found
    node = swarm.node_of(found["NodeID"])
    return node, node.client.containers.get(found["Status"]["ContainerStatus"]["ContainerID"])


def labelled(swarm: Swarm, name: str) -> tuple[list[Any], list[Any]]:
    api = swarm.manager.api
    selector = {"label": f"{LABEL}={name}"}
    return api.services(filters=selector), api.secrets(filters=selector)


def test_agents_spread_across_the_nodes_and_each_serves_a_turn_with_no_secret_in_sight(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User, owner_client: APIClient
) -> None:
    a, token = register_plan(swarm_control, "plan-a")
    agents = [agent_on(owner, a, name=f"bot{i}") for i in range(3)]
    for agent in agents:
        body = task(owner_client, agent=agent.name)
        assert body["http_status"] == 200, body
    assert messages_sent(swarm_control) == [("plan-a", 200)] * 3
    nodes = {placed(swarm, agent)[0].name for agent in agents}
    assert nodes == {node.name for node in swarm.nodes}

    # The service shows neither the plan's token nor the agent's secret: both are in
    # the swarm secret, which the engine never shows.
    agent = Agent.objects.get(pk=agents[0].pk)
    shown = json.dumps(swarm.manager.api.inspect_service(agent.process_handle))
    assert token not in shown and agent.shared_secret.reveal() not in shown
    assert "TRINITY_AGENT_ENV_FILE=/run/secrets/trinity-agent-env" in shown


def test_the_task_carries_the_limits_and_the_hardening_and_its_server_gave_up_net_admin(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User
) -> None:
    a, _ = register_plan(swarm_control, "plan-a")
    agent = lifecycle.agent_start(agent=agent_on(owner, a))
    assert agent.isolation == "container"
    _, container = placed(swarm, agent)
    host = container.attrs["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    added = sorted(cap.removeprefix("CAP_") for cap in host["CapAdd"])
    assert added == ["CHOWN", "DAC_OVERRIDE", "KILL", "NET_ADMIN", "SETGID", "SETPCAP", "SETUID"]
    assert host["ReadonlyRootfs"] is True
    assert (host["Memory"], host["NanoCpus"], host["PidsLimit"]) == (1024**3, 1_500_000_000, 256)
    # The server dropped NET_ADMIN once its guard was in place, and no process of the
    # container can gain a privilege by exec.
    code, output = container.exec_run(["cat", "/proc/1/status"])
    status = proc_status(output.decode())
    assert code == 0 and status["NoNewPrivs"] == "1", status
    assert status["CapEff"] == status["CapBnd"] == cap_mask(CAPABILITIES), status


def test_a_walk_on_a_worker_node_commits_a_hot_reloaded_switch(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(swarm_control, "plan-a")
    b, _ = register_plan(swarm_control, "plan-b")
    worker = swarm.workers[0]
    agent = agent_on(owner, a)
    Agent.objects.filter(pk=agent.pk).update(placement={POOL_LABEL: worker.name})

    assert task(owner_client)["http_status"] == 200
    node, container = placed(swarm, agent)
    assert node.name == worker.name

    swarm_control.clear_requests()
    swarm_control.set_usage(a_token, "five_hour", percent=100)
    body = task(owner_client)
    assert body["http_status"] == 200, body
    assert messages_sent(swarm_control) == [("plan-a", 429), ("plan-b", 200)]
    assert body["subscription_switch"]["committed"] and body["subscription_switch"]["to"] == b.pk

    # Hot-reloaded into the same task's server, still on the worker.
    assert placed(swarm, agent)[1].id == container.id
    swarm_control.clear_requests()
    assert task(owner_client)["http_status"] == 200
    assert messages_sent(swarm_control) == [("plan-b", 200)]


def test_two_racing_starts_make_one_service_and_the_loser_creates_nothing(
    swarm_control: SimulatorControl, swarm: Swarm
) -> None:
    spec = SpawnSpec(name="racer", runtime="claude-code", model="", secret=Secret("r" * 40))
    results: list[Any] = []

    def start() -> None:
        try:
            results.append(SwarmRuntime().start(spec))
        except StartConflict as exc:
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kinds = sorted(type(r).__name__ for r in results)
    assert kinds == ["Spawned", "StartConflict"], results
    services, secrets = labelled(swarm, "racer")
    assert len(services) == 1 and len(secrets) == 1
    SwarmRuntime().stop(name="racer", handle=services[0]["ID"])
    assert labelled(swarm, "racer") == ([], [])


def test_deleting_the_agent_removes_its_service_and_its_secret(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(swarm_control, "plan-a")
    agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200
    services, secrets = labelled(swarm, Agent.objects.get().runtime_key)
    assert len(services) == 1 and len(secrets) == 1

    assert owner_client.delete("/api/agents/bot").status_code == 204
    assert labelled(swarm, services[0]["Spec"]["Labels"][LABEL]) == ([], [])


def test_from_inside_an_agent_task_the_stores_and_the_other_agents_are_unreachable(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User
) -> None:
    a, _ = register_plan(swarm_control, "plan-a")
    one = lifecycle.agent_start(agent=agent_on(owner, a, name="one"))
    two = lifecycle.agent_start(agent=agent_on(owner, a, name="two"))
    _, container = placed(swarm, one)
    found = newest_task(swarm.manager, two.process_handle)
    assert found is not None
    overlay = found["NetworksAttachments"][0]["Addresses"][0].split("/")[0]
    published = two.endpoint.removeprefix("http://")
    host = swarm.host_address
    # As the agent's user (what the CLI's tools run as): the other agent, on the
    # overlay and at its published port, the stores and the host are all closed.
    targets = [f"{overlay}:8080", published, f"{host}:5432", f"{host}:6379"]
    assert reach(container, "trinity-agent", targets) == [REFUSED] * 4
    # Root in the same container (the server, whose forwarder reaches the upstream)
    # reaches the other agent: the probe can tell, and the guard is what closes it.
    assert reach(container, "root", [f"{overlay}:8080"]) == ["open"]


def test_the_runtime_asks_for_an_encrypted_overlay_unless_told_not_to(swarm: Swarm) -> None:
    """Encryption cannot carry traffic between these nodes (no IPsec AEAD cipher in
    this kernel, conftest's docstring), but the runtime's network asks for it."""
    name = f"trinity-agents-encrypted-{id(swarm)}"
    with override_settings(TRINITY_SWARM_NETWORK=name, TRINITY_SWARM_NETWORK_ENCRYPTED=True):
        network_id = agents_overlay(swarm.manager)
    try:
        attrs = swarm.manager.api.inspect_network(network_id, scope="swarm")
        assert attrs["Driver"] == "overlay" and "encrypted" in attrs["Options"], attrs
        assert attrs["Labels"] == {"trinity.network": "agents"}
    finally:
        swarm.manager.api.remove_network(network_id)


def _node_state(swarm: Swarm, node: Node) -> str:
    for found in swarm.manager.api.nodes():
        if found["Status"]["Addr"] == node.address:
            return str(found["Status"]["State"])
    return "gone"


def test_a_lost_worker_nodes_agents_are_served_on_the_remaining_nodes(
    swarm_control: SimulatorControl, swarm: Swarm, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(swarm_control, "plan-a")
    agents = [agent_on(owner, a, name=f"bot{i}") for i in range(3)]
    for agent in agents:
        assert task(owner_client, agent=agent.name)["http_status"] == 200
    where = {agent.name: placed(swarm, agent)[0] for agent in agents}
    victim = next(node for node in where.values() if node.role == "worker")
    lost = [name for name, node in where.items() if node.name == victim.name]

    try:
        assert harness("kill", victim.name).returncode == 0
        wait_until(lambda: _node_state(swarm, victim) == "down", seconds=60, what="node down")

        swarm_control.clear_requests()
        for agent in agents:
            body = task(owner_client, agent=agent.name)
            assert body["http_status"] == 200, body
        assert messages_sent(swarm_control) == [("plan-a", 200)] * 3
        for name in lost:
            node, _ = placed(swarm, Agent.objects.get(name=name))
            assert node.name != victim.name
    finally:
        revived = harness("revive", victim.name)
        assert revived.returncode == 0, revived.stderr
        wait_until(lambda: _node_state(swarm, victim) == "ready", seconds=60, what="node back")
