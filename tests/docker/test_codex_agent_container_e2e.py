"""A Codex agent on the docker runtime: its server in its own container from the agent
image, the real Codex CLI (the pinned one the image carries) inside it as the image's
unprivileged user, the provider simulator's ChatGPT backend as the upstream. Which
plan served is read from the simulator's request log; what the container is, from
the engine and from inside it."""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from agents.runtimes.docker import WORK_AREA
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.docker.hardening import assert_hardened
from tests.execution.support import register_codex_plan, task
from tests.proc_status import proc_status
from tests.reach import PROBE, REFUSED
from trinity.models import Notification

# The agent's working directory in its work area.
WORK_DIR = str(PurePosixPath(WORK_AREA, "work"))

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PLAN_PATH = "/backend-api/codex/responses"
MODEL = "gpt-5.5-codex"
# Where the image staged the CLIs for the agent user (deploy/Dockerfile.agent).
CLI_CACHE = "/opt/trinity/cli"
TRIGGER = "codex-container-probe-3b9d"


def codex_agent(owner: User, plan: Subscription) -> Agent:
    agent = AgentFactory.create(name="coder", owner=owner, runtime="codex-cli", model=MODEL)
    return subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)


def turns_sent(control: SimulatorControl) -> list[tuple[str, str | None, int]]:
    """(auth kind, plan, status) of every turn request the ChatGPT backend saw."""
    return [
        (r["auth_kind"], r["credential"], r["status"])
        for r in control.requests()
        if r["path"] == PLAN_PATH
    ]


def container_of(engine: Any, agent: Agent) -> Any:
    agent.refresh_from_db()
    return engine.containers.get(agent.process_handle)


def run(container: Any, command: str, *, user: str = "root") -> str:
    code, output = container.exec_run(["sh", "-c", command], user=user)
    text: str = output.decode(errors="replace").strip()
    assert code == 0, (command, text)
    return text


def test_a_codex_agents_turn_is_served_by_the_codex_cli_in_its_container_and_walks_there(
    docker_control: SimulatorControl,
    engine: Any,
    agent_image: str,
    owner: User,
    owner_client: APIClient,
) -> None:
    a, a_token = register_codex_plan(docker_control, "gpt-a")
    b, _ = register_codex_plan(docker_control, "gpt-b")
    agent = codex_agent(owner, a)
    docker_control.clear_requests()

    body = task(owner_client, agent="coder", message="say hi")

    assert body["http_status"] == 200, body
    assert body["response"] == "Simulated reply: say hi"
    assert body["served_by_subscription"] == {"id": a.pk, "name": "gpt-a"}
    assert body["input_tokens"] > 0 and body["output_tokens"] > 0
    assert turns_sent(docker_control) == [("codex", "gpt-a", 200)]
    # Nothing of it went to the Anthropic side.
    assert not [r for r in docker_control.requests() if r["path"].startswith("/v1/messages")]
    container = container_of(engine, agent)
    assert container.status == "running"
    assert container.image.id == engine.images.get(agent_image).id
    assert agent.isolation == "container"
    # The CLI that served is the image's staged copy: one file, hard-linked to the
    # one in its npm package (the image holds the binary once).
    staged = run(container, f"stat -c '%h %U %a' {CLI_CACHE}/codex-*")
    assert staged == "2 root 755", staged

    # A plan that runs out mid-life: the next turn walks to the other plan in the same
    # running container, and the switch is committed once.
    docker_control.set_usage(a_token, "five_hour", percent=100)
    docker_control.clear_requests()
    body = task(owner_client, agent="coder")
    assert body["http_status"] == 200, body
    assert turns_sent(docker_control) == [("codex", "gpt-a", 429), ("codex", "gpt-b", 200)]
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk
    assert Notification.objects.filter(kind="subscription_switched").count() == 1
    assert container_of(engine, agent).id == container.id


def test_a_codex_agents_container_keeps_the_hardening_and_its_cli_runs_as_the_agent_user(
    docker_control: SimulatorControl, engine: Any, owner: User, owner_client: APIClient
) -> None:
    plan, _ = register_codex_plan(docker_control, "gpt-a")
    agent = lifecycle.agent_start(agent=codex_agent(owner, plan))
    assert_hardened(engine, agent.process_handle)

    # A chat turn keeps its session's home, so what the CLI wrote is there to read.
    response = owner_client.post(
        "/api/agents/coder/chat", {"message": "say hi", "session_id": "chat-1"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert turns_sent(docker_control)[-1] == ("codex", "gpt-a", 200)

    container = container_of(engine, agent)
    # The CLI ran as the image's agent user, in the work area: its thread's history
    # (CODEX_HOME/sessions) is that user's, private to it.
    owners = run(
        container,
        f"find {WORK_AREA}/homes -name 'rollout-*.jsonl' -printf '%u %m\\n'",
    )
    assert owners.splitlines() == ["trinity-agent 600"], owners
    # Its root is read-only to that user and to root alike; /tmp and the work area take
    # writes.
    probe = (
        "for f in /opt/trinity/cli/x /opt/trinity/agent_server/x /etc/x /tmp/x "
        f"{WORK_DIR}/x; do "
        'if (echo hi > "$f") 2>/dev/null; then echo "$f written"; else echo "$f refused"; fi; '
        "done"
    )
    assert run(container, probe, user="trinity-agent").splitlines() == [
        "/opt/trinity/cli/x refused",
        "/opt/trinity/agent_server/x refused",
        "/etc/x refused",
        "/tmp/x written",
        f"{WORK_DIR}/x written",
    ]
    code, output = container.exec_run(["touch", "/opt/trinity/cli/x"])
    assert code != 0 and b"Read-only file system" in output, output


def test_the_codex_clis_commands_run_in_the_container_as_the_agent_user_under_its_bounds(
    docker_control: SimulatorControl,
    container_simulator: Any,
    gateway: str,
    owner: User,
    owner_client: APIClient,
) -> None:
    """The simulator's scripted model has the real Codex CLI run shell commands
    (exec_command) in the container. The CLI's own sandbox is off there (it needs user
    namespaces the engine's seccomp profile refuses), so the container is their bound:
    they run as the agent user with no capability under no-new-privileges, find the root
    read-only, and the egress guard refuses them the host's upstream on the bridge."""
    plan, _ = register_codex_plan(docker_control, "gpt-a")
    codex_agent(owner, plan)
    upstream = f"{gateway}:{container_simulator.base_url.rsplit(':', 1)[1]}"
    commands = [
        "id -un",
        "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status",
        "touch /opt/trinity/cli/x 2>&1 || true",
        f"python3 -c {shlex.quote(PROBE)} {upstream}",
    ]
    docker_control.arm_red_team(trigger=TRIGGER, reads=[], commands=commands)

    body = task(owner_client, agent="coder", message=f"{TRIGGER}: look around")

    assert body["http_status"] == 200, body
    script = docker_control.red_team()
    results = {(r["input"] or {}).get("cmd"): r["content"] for r in script["results"]}
    assert set(results) == set(commands), results
    assert "trinity-agent" in results[commands[0]]
    status = proc_status(results[commands[1]])
    assert (status["CapEff"], status["NoNewPrivs"]) == ("0" * 16, "1"), status
    assert "Read-only file system" in results[commands[2]]
    assert REFUSED in results[commands[3]]
    assert turns_sent(docker_control) == [("codex", "gpt-a", 200)] * 2
