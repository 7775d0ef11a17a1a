"""An agent's container is hardened, and a real turn still serves in it.

The docker runtime on the real engine, the agent image, the real Claude Code CLI and
the provider simulator's scripted tool-using model (simulator/redteam.py), whose Bash
calls run inside the container as the CLI's tools do: as the image's unprivileged
agent user, under the agent server. What the container is, is read from the engine
(docker inspect) and from the kernel inside it (/proc/<pid>/status).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from agents.runtimes.docker import CAPABILITIES, WORK_AREA
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.docker.hardening import assert_hardened
from tests.execution.support import messages_sent, register_plan, task, wait_until
from tests.proc_status import cap_mask, proc_status

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# A setuid-root copy of `id`, planted by root in the work area (a volume: mounted
# without nosuid, so only no-new-privileges stands between it and euid 0).
SETUID_ID = f"{WORK_AREA}/setuid-id"
TRIGGER = "hardening-probe"
STATUS = "grep -E '^(Uid|NoNewPrivs|Seccomp|CapPrm|CapEff|CapBnd):' /proc/self/status"
WRITES = (
    "for f in /opt/trinity/x /etc/x /usr/local/bin/x /tmp/x ./x; do "
    'if (echo hi > "$f") 2>/dev/null; then echo "$f written"; else echo "$f refused"; fi; done'
)
READ_ONLY = "touch /usr/local/bin/x 2>&1"


def _agent_with_bash(owner: User, control: SimulatorControl) -> Agent:
    plan, _ = register_plan(control, "plan-a")
    agent = AgentFactory.create(name="bot", owner=owner, allowed_tools=["Bash"])
    return subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)


def _plant_setuid_id(container: Any) -> None:
    """As root in the container (docker exec): a setuid-root copy of `id`, which the
    agent user may run."""
    plant = f"cp /usr/bin/id {SETUID_ID} && chmod 4755 {SETUID_ID} && ls -ln {SETUID_ID}"
    code, output = container.exec_run(["sh", "-c", plant])
    assert code == 0 and output.decode().startswith("-rwsr-xr-x 1 0 0"), output


def test_docker_inspect_shows_the_hardening_and_the_limits(
    docker_control: SimulatorControl, engine: Any, owner: User
) -> None:
    agent = lifecycle.agent_start(agent=_agent_with_bash(owner, docker_control))
    host = assert_hardened(engine, agent.process_handle)["HostConfig"]
    assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (1024**3, 256, 1_500_000_000)


def test_a_turn_serves_and_its_tools_find_a_read_only_root_and_no_way_to_privilege(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    agent = lifecycle.agent_start(agent=_agent_with_bash(owner, docker_control))
    container = engine.containers.get(agent.process_handle)
    _plant_setuid_id(container)
    commands = [STATUS, WRITES, SETUID_ID, READ_ONLY]
    docker_control.arm_red_team(trigger=TRIGGER, reads=[], commands=commands)

    body = task(owner_client, message=f"{TRIGGER}: look around")

    assert body["http_status"] == 200, body
    assert messages_sent(docker_control)[-1] == ("plan-a", 200)
    script = docker_control.red_team()
    results = {(r["input"] or {}).get("command"): r["content"] for r in script["results"]}
    assert set(results) == set(commands), results
    # The tools run as the agent user, with no capability, no-new-privileges, seccomp.
    status = proc_status(results[STATUS])
    assert "0" not in status["Uid"].split(), status
    assert (status["CapPrm"], status["CapEff"]) == ("0" * 16, "0" * 16), status
    assert status["CapBnd"] == cap_mask(CAPABILITIES), status
    assert (status["NoNewPrivs"], status["Seccomp"]) == ("1", "2"), status
    # A setuid-root binary runs as the caller: no euid 0.
    assert results[SETUID_ID].startswith("uid=") and "euid=" not in results[SETUID_ID]
    assert "trinity-agent" in results[SETUID_ID], results[SETUID_ID]
    # The root file system refuses writes as read-only (not merely by permissions);
    # /tmp and the working directory take them.
    assert "cannot touch '/usr/local/bin/x': Read-only file system" in results[READ_ONLY]
    assert results[WRITES].split("\n") == [
        "/opt/trinity/x refused",
        "/etc/x refused",
        "/usr/local/bin/x refused",
        "/tmp/x written",
        "./x written",
    ], results[WRITES]

    # Root in the container (the server) cannot write the root either, and the task's
    # private HOME, which the agent user owned, went after the turn (removing it is
    # what DAC_OVERRIDE is kept for).
    code, output = container.exec_run(["touch", "/etc/x"])
    assert code != 0 and b"Read-only file system" in output, output
    code, output = container.exec_run(["ls", "-A", f"{WORK_AREA}/homes"])
    assert (code, output) == (0, b""), output


def _cli_running(container: Any) -> bool:
    processes = container.top(ps_args="-eo pid,args").get("Processes") or []
    return any("claude" in " ".join(row) for row in processes)


def test_a_timed_out_turns_cli_dies_with_it_though_it_is_another_users_process(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    """The server kills the CLI (the agent user's process) when a turn ends early: the
    capability set keeps KILL for it. Without KILL the kill fails silently and the
    CLI waits on, still spending, after its turn has been reported over."""
    agent = lifecycle.agent_start(agent=_agent_with_bash(owner, docker_control))
    container = engine.containers.get(agent.process_handle)
    docker_control.set_latency(60_000)

    body = task(owner_client, timeout_seconds=5)

    assert body["http_status"] != 200 and body["error_code"] == "timeout", body
    wait_until(lambda: not _cli_running(container), seconds=10, what="the CLI gone")
    # The server's forwarder still holds the CLI's upstream request: release it, so it
    # lands in this test's request log, not the next one's.
    docker_control.set_latency(0)
    wait_until(lambda: docker_control.latency()["in_flight"] == 0, seconds=10, what="no request")
