"""The platform's side of the forwarder, end to end: real local agent servers, the real
Claude Code CLI, the simulator, the real database and cache.

- a served turn's forwarded rate-limit headers become the plan's headroom snapshot;
- an agent's work area lives outside var/, owned (as root) by an OS user of the
  agent's own that its discard removes, and its isolation is kept on its row;
- after a committed hot-reload, no file an agent can reach holds the plan token.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from agents.runtimes import local
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_read
from tests.agent_server.support import files_holding
from tests.agents.factories import AgentFactory
from tests.execution.support import register_plan

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _plan(control: SimulatorControl, name: str) -> tuple[str, int]:
    """A plan not read yet (no first look): what a turn leaves is the only reading."""
    subscription, token = register_plan(control, name)
    return token, subscription.pk


def test_a_served_turn_leaves_a_fresh_headroom_reading_of_the_plan_it_ran_on(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    token, subscription_id = _plan(control, "plan-a")
    _, other_id = _plan(control, "plan-b")
    control.set_usage(token, "five_hour", percent=42)
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=subscription_id)

    response = owner_client.post("/api/agents/bot/task", {"message": "say hi"}, format="json")

    assert response.status_code == 200, response.content
    snapshots = snapshots_read([subscription_id, other_id])
    reading = snapshots.get(subscription_id)
    assert reading is not None, "the served turn left no reading"
    assert reading.source == "turn"
    assert reading.status.value == "ok"
    assert reading.utilization("five_hour") == pytest.approx(42, abs=1)
    assert snapshots.get(other_id) is None  # only the plan that was sent
    probes = [r for r in control.requests() if r["path"].startswith("/api/oauth/usage")]
    assert probes == []  # no probe was spent on it


def test_an_agent_works_outside_var_and_its_isolation_is_on_its_row(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    _, subscription_id = _plan(control, "plan-a")
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=subscription_id)
    agent = lifecycle.agent_start(agent=agent)

    area = local.work_root() / "bot"
    body = owner_client.get("/api/agents/bot").json()

    # As root (CI), the agent's CLI runs in its sandbox (make setup installs bubblewrap).
    expected = "sandbox" if os.geteuid() == 0 else "same-user"
    assert Agent.objects.get(pk=agent.pk).isolation == expected
    assert body["isolation"] == expected
    assert (area / "work").is_dir()
    assert not area.resolve().is_relative_to(Path(settings.VAR_DIR).resolve())
    assert (Path(settings.VAR_DIR) / "agents" / "bot").stat().st_mode & 0o077 == 0
    if os.geteuid() == 0:
        own = pwd.getpwnam(local.os_user_name("bot"))
        assert (area / "work").stat().st_uid == own.pw_uid
        assert (area.stat().st_gid, area.stat().st_mode & 0o777) == (own.pw_gid, 0o710)

    lifecycle.agent_stop(agent=agent)
    local.LocalProcessRuntime().discard(name="bot")
    assert not area.exists()
    with pytest.raises(KeyError):
        pwd.getpwnam(local.os_user_name("bot"))


def test_after_a_committed_hot_reload_no_file_an_agent_can_reach_holds_the_token(
    control: SimulatorControl,
) -> None:
    _, first_id = _plan(control, "plan-a")
    token_b, second_id = _plan(control, "plan-b")
    agent = AgentFactory.create(name="bot")
    subscription_services.assignment_set(agent=agent, subscription_id=first_id)
    agent = lifecycle.agent_start(agent=agent)
    subscription_services.assignment_set(agent=agent, subscription_id=second_id)
    agent.refresh_from_db()

    lifecycle.hot_reload_subscription_token(agent=agent)
    agent.refresh_from_db()
    served = lifecycle.client_for(agent).run_turn(
        execution_id="e-reload", message="say hi", timeout_seconds=90
    )

    assert served.ok, served.detail
    assert {r["credential"] for r in control.requests() if r["path"].startswith("/v1/")} >= {
        "plan-b"
    }
    for place in (local.work_root() / "bot", Path(settings.VAR_DIR) / "agents" / "bot"):
        assert files_holding(place, token_b) == [], place
