"""Agent lifecycle end to end: real local agent-server processes running the real
Claude Code CLI against the provider simulator, on the real database.

Each turn's credential is read from the simulator's request log, so the assertions
are about what actually went on the wire.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent, AuthMode, ProcessState
from agents.runtimes import Spawned, SpawnSpec, local
from agents.runtimes.base import StartConflict
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _register(control: SimulatorControl, label: str, name: str | None = None) -> tuple[str, int]:
    token = plan_token()
    control.register(token, kind="oauth", label=label)
    subscription, _ = subscription_services.subscription_register(
        name=name or label, provider="anthropic", plan_type="max-20x", token=token
    )
    return token, subscription.pk


def _running_agent(name: str, subscription_id: int, **fields: object) -> Agent:
    agent = AgentFactory.create(name=name, **fields)
    subscription_services.assignment_set(agent=agent, subscription_id=subscription_id)
    return lifecycle.agent_start(agent=agent)


def _kill(agent: Agent) -> int:
    """SIGKILL the agent's server (a crash, an OOM) and reap it; returns its pid."""
    pid = int(agent.process_handle)
    os.killpg(pid, signal.SIGKILL)
    local._children.pop(pid).wait(timeout=10)
    return pid


def _turn(agent: Agent, control: SimulatorControl) -> tuple[bool, str | None]:
    """Run one real turn; return (served, label of the credential the simulator saw)."""
    control.clear_requests()
    agent.refresh_from_db()
    outcome = lifecycle.client_for(agent).run_turn(
        execution_id=str(uuid.uuid4()), message="say hi", timeout_seconds=90
    )
    messages = [r for r in control.requests() if r["path"].startswith("/v1/messages")]
    return outcome.ok, messages[-1]["credential"] if messages else None


def test_an_assigned_agent_boots_on_its_subscription_and_hot_reloads_on_reassignment(
    control: SimulatorControl, admin_user: object
) -> None:
    _, first_id = _register(control, "plan-a")
    _, second_id = _register(control, "plan-b")
    agent = _running_agent("bot", first_id)
    assert agent.process_state == ProcessState.RUNNING
    assert agent.auth_mode == AuthMode.SUBSCRIPTION
    assert _turn(agent, control) == (True, "plan-a")
    pid_before = agent.process_handle

    client = APIClient()
    client.force_login(admin_user)  # type: ignore[arg-type]
    response = client.put(
        "/api/subscriptions/agents/bot", {"subscription_id": second_id}, format="json"
    )
    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.process_handle == pid_before  # hot-reloaded, not restarted
    assert _turn(agent, control) == (True, "plan-b")

    # Key rollover on plan-b fans out to the agent running on it.
    new_token = plan_token()
    control.register(new_token, kind="oauth", label="plan-b-rotated")
    response = client.post(
        "/api/subscriptions",
        {"name": "plan-b", "token": new_token, "provider": "anthropic", "plan_type": "max-20x"},
        format="json",
    )
    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.process_handle == pid_before
    assert _turn(agent, control) == (True, "plan-b-rotated")


def test_a_mode_change_recreates_the_agent_on_the_platform_key(
    control: SimulatorControl,
) -> None:
    key = "sk-ant-api03-" + uuid.uuid4().hex + uuid.uuid4().hex
    control.register(key, kind="api_key", label="platform-key", credit_usd=100)
    trinity_services.platform_api_key_set(key=key)
    _, plan_id = _register(control, "plan-a")
    agent = _running_agent("bot", plan_id, use_platform_api_key=True)
    pid_before = agent.process_handle

    subscription_services.assignment_clear(agent=agent)
    agent.refresh_from_db()
    assert agent.auth_mode == AuthMode.API_KEY
    assert agent.process_handle != pid_before  # recreated
    assert _turn(agent, control) == (True, "platform-key")

    # And back: a subscription again recreates, and the boot guard keeps any
    # API key out of the way of the plan token.
    subscription_services.assignment_set(agent=agent, subscription_id=plan_id)
    agent.refresh_from_db()
    assert agent.auth_mode == AuthMode.SUBSCRIPTION
    assert _turn(agent, control) == (True, "plan-a")


def test_a_failed_reload_falls_back_to_a_restart_on_the_current_token(
    control: SimulatorControl,
) -> None:
    _, plan_id = _register(control, "plan-a")
    agent = _running_agent("bot", plan_id)
    old_pid = _kill(agent)  # the server is gone: reload-token cannot connect

    assert lifecycle.hot_reload_subscription_token(agent=agent) == "restarted"
    agent.refresh_from_db()
    assert int(agent.process_handle) != old_pid
    assert _turn(agent, control) == (True, "plan-a")


def test_a_restarted_web_process_finds_the_running_agent_and_stop_ends_it(
    control: SimulatorControl,
) -> None:
    _, plan_id = _register(control, "plan-a")
    agent = _running_agent("bot", plan_id)
    child = local._children.pop(int(agent.process_handle))  # forget it, like a new process
    again = lifecycle.agent_start(agent=Agent.objects.get(pk=agent.pk))
    assert again.process_handle == agent.process_handle  # found, not respawned
    assert lifecycle.agent_health(agent=again)["alive"] is True

    local._children[child.pid] = child
    stopped = lifecycle.agent_stop(agent=again)
    assert stopped.process_state == ProcessState.STOPPED
    assert child.wait(timeout=10) is not None
    assert lifecycle.agent_health(agent=stopped)["alive"] is False


def test_supervise_revives_a_running_agent_whose_server_died_and_leaves_stopped_ones(
    control: SimulatorControl,
) -> None:
    _, plan_id = _register(control, "plan-a")
    crashed = _running_agent("crashed", plan_id)
    stopped = lifecycle.agent_stop(agent=_running_agent("stopped", plan_id))
    pid = _kill(crashed)

    assert lifecycle.agents_supervise() == ["crashed"]
    crashed.refresh_from_db()
    stopped.refresh_from_db()
    assert int(crashed.process_handle) != pid
    assert _turn(crashed, control) == (True, "plan-a")
    assert stopped.process_state == ProcessState.STOPPED
    assert lifecycle.agents_supervise() == []


def test_two_starts_that_race_record_one_server_and_stop_the_other(
    control: SimulatorControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second start lands while the first is spawning, with the cache marker out of
    play (as when Redis is down). The agent's socket is the exclusive claim: the
    loser's server cannot bind it, the loser stops its own and waits for the winner's
    record, and exactly one server is left."""
    _, plan_id = _register(control, "plan-a")
    agent = AgentFactory.create(name="bot")
    subscription_services.assignment_set(agent=agent, subscription_id=plan_id)
    spawned: list[str] = []

    class InterleavingRuntime(local.LocalProcessRuntime):
        """The real local runtime; its first start lets a rival start finish first."""

        def start(self, spec: SpawnSpec) -> Spawned:
            if not spawned:
                spawned.append("rival")
                spawned.append(lifecycle.agent_start(agent=agent).process_handle)
            try:
                result = super().start(spec)
            except StartConflict:
                spawned.append(str(watched[-1]))  # the server this start spawned
                raise
            spawned.append(result.handle)
            return result

    watched: list[int] = []
    watch = local._watch

    def recording_watch(process: subprocess.Popen[bytes]) -> None:
        watched.append(process.pid)
        watch(process)

    monkeypatch.setattr(local, "_watch", recording_watch)
    monkeypatch.setattr(lifecycle, "get_runtime", InterleavingRuntime)
    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    ):
        lifecycle.agent_start(agent=agent)
    _, rival_handle, rival_spawn, loser_handle = spawned
    assert rival_handle == rival_spawn
    agent.refresh_from_db()
    assert agent.process_state == ProcessState.RUNNING
    assert agent.process_handle == rival_handle
    assert not local.LocalProcessRuntime().is_alive(name="bot", handle=loser_handle)
    assert _turn(agent, control) == (True, "plan-a")
