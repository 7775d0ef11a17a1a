"""Deleting an agent, or the subscription it ran on, removes what it left on disk:
the plan token file first, then (for an agent) its home folder, log and work area.

Real local agent-server processes on the real database. Today's agent servers keep a
hot-reloaded token in memory only; the token file here is the one a server before the
forwarder wrote, which an upgraded platform must still remove first.
The docker side of a delete (containers and volumes) is pinned on a real engine in
tests/docker/test_agent_containers_e2e.py.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from agents import lifecycle
from agents import services as agent_services
from agents.models import Agent, AuthMode
from agents.runtimes import local
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _register(control: SimulatorControl, label: str) -> tuple[str, int]:
    token = plan_token()
    control.register(token, kind="oauth", label=label)
    subscription, _ = subscription_services.subscription_register(
        name=label, provider="anthropic", plan_type="max-20x", token=token
    )
    return token, subscription.pk


def _home(name: str) -> Path:
    return Path(settings.VAR_DIR) / "agents" / name


def _token_file(name: str) -> Path:
    return _home(name) / ".trinity" / "oauth_token"


def _agent_with_a_token_file(control: SimulatorControl, name: str) -> tuple[Agent, str, int]:
    """A running agent hot-reloaded onto plan-b: its server wrote plan-b's token file.

    Returns the agent, plan-b's token and plan-b's id."""
    _, first_id = _register(control, "plan-a")
    token, second_id = _register(control, "plan-b")
    agent = AgentFactory.create(name=name)
    subscription_services.assignment_set(agent=agent, subscription_id=first_id)
    agent = lifecycle.agent_start(agent=agent)
    subscription_services.assignment_set(agent=agent, subscription_id=second_id)
    assert not _token_file(name).exists()  # the hot-reload wrote nothing
    _token_file(name).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _token_file(name).write_text(token)  # what an older server left behind
    agent.refresh_from_db()
    return agent, token, second_id


def test_deleting_an_agent_removes_its_token_file_home_and_log(control: SimulatorControl) -> None:
    agent, _, _ = _agent_with_a_token_file(control, "bot")
    pid = agent.process_handle
    assert (_home("bot") / "server.log").exists()

    agent_services.agent_delete(agent=agent)

    assert not _token_file("bot").exists()
    assert not _home("bot").exists()
    assert not (local.work_root() / "bot").exists()
    assert not Agent.objects.filter(name="bot").exists()
    assert not local.LocalProcessRuntime().is_alive(name="bot", handle=pid)


def test_an_agent_delete_that_fails_midway_has_already_removed_the_token_file(
    control: SimulatorControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injected: removing the home fails (a full disk, a permission), after the
    server stopped. The secret is the first thing to go, so it is gone anyway."""
    agent, _, _ = _agent_with_a_token_file(control, "bot")

    def failing_rmtree(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(f"cannot remove {path}")

    monkeypatch.setattr(shutil, "rmtree", failing_rmtree)
    with pytest.raises(PermissionError):
        agent_services.agent_delete(agent=agent)
    assert not _token_file("bot").exists()
    assert (_home("bot") / "server.log").exists()  # the rest waits for a retry
    assert Agent.objects.filter(name="bot").exists()


def test_deleting_the_subscription_an_agent_ran_on_removes_its_token_and_moves_it_on(
    control: SimulatorControl,
) -> None:
    key = "sk-ant-api03-" + uuid.uuid4().hex + uuid.uuid4().hex
    control.register(key, kind="api_key", label="platform-key", credit_usd=100)
    trinity_services.platform_api_key_set(key=key)
    agent, _, plan_id = _agent_with_a_token_file(control, "bot")
    bystander = lifecycle.agent_start(agent=AgentFactory.create(name="bystander"))
    pid_before = agent.process_handle

    subscription_services.subscription_delete(subscription=Subscription.objects.get(pk=plan_id))

    assert not _token_file("bot").exists()
    agent.refresh_from_db()
    assert agent.subscription_id is None
    # Recreated on its new baseline (the platform key), not left on the deleted plan.
    assert agent.auth_mode == AuthMode.API_KEY
    assert agent.process_handle != pid_before
    control.clear_requests()
    outcome = lifecycle.client_for(agent).run_turn(
        execution_id=str(uuid.uuid4()), message="say hi", timeout_seconds=90
    )
    messages = [r for r in control.requests() if r["path"].startswith("/v1/messages")]
    assert outcome.ok
    assert messages[-1]["credential"] == "platform-key"
    # An agent that did not run on it keeps its server and its home.
    bystander.refresh_from_db()
    assert local.LocalProcessRuntime().is_alive(name="bystander", handle=bystander.process_handle)
    assert _home("bystander").exists()
