from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db

URL = "/api/agents"


def test_any_user_creates_an_agent_they_own(owner_client: APIClient, owner: object) -> None:
    response = owner_client.post(URL, {"name": "bot", "model": "claude-sonnet-4-5"}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["owner"] == "owner"
    assert data["runtime"] == "claude-code"
    assert data["use_platform_api_key"] is None  # unset: follows the system's fallback
    assert data["subscription"] is None
    assert "shared_secret" not in data
    agent = Agent.objects.get(name="bot")
    assert agent.owner == owner
    assert len(agent.shared_secret.reveal()) >= 32


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Not A Slug!"}, "name"),
        ({}, "name"),
        ({"name": "bot", "runtime": "gpt"}, "runtime"),
        ({"name": "bot", "use_platform_api_key": "perhaps"}, "use_platform_api_key"),
        ({"name": "bot", "routing_policy": "random"}, "routing_policy"),
    ],
)
def test_bad_input_is_400_by_field(
    owner_client: APIClient, body: dict[str, object], field: str
) -> None:
    response = owner_client.post(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Agent.objects.exists()


def test_a_name_the_owner_already_uses_is_a_conflict(owner_client: APIClient, owner: User) -> None:
    AgentFactory.create(name="bot", owner=owner)
    response = owner_client.post(URL, {"name": "bot"}, format="json")
    assert response.status_code == 409
    assert response.json() == {"name": ["You already have an agent named 'bot'."]}
    assert Agent.objects.count() == 1


def test_use_platform_api_key_can_be_unset(owner_client: APIClient) -> None:
    response = owner_client.post(URL, {"name": "bot", "use_platform_api_key": None}, format="json")
    assert response.status_code == 201
    assert Agent.objects.get(name="bot").use_platform_api_key is None


def test_list_is_scoped_to_the_owner_and_admin_sees_all(
    owner_client: APIClient, other_client: APIClient, admin_client_api: APIClient, owner: object
) -> None:
    AgentFactory.create(name="mine", owner=owner)
    AgentFactory.create(name="theirs")
    assert [a["name"] for a in owner_client.get(URL).json()] == ["mine"]
    assert other_client.get(URL).json() == []
    assert [a["name"] for a in admin_client_api.get(URL).json()] == ["mine", "theirs"]


def test_owner_and_admin_update_and_delete_another_user_cannot(
    owner_client: APIClient, other_client: APIClient, admin_client_api: APIClient, owner: object
) -> None:
    AgentFactory.create(name="bot", owner=owner, model="claude-sonnet-4-5")
    assert other_client.get(f"{URL}/bot").status_code == 404
    assert other_client.patch(f"{URL}/bot", {"model": "x"}, format="json").status_code == 404
    assert other_client.delete(f"{URL}/bot").status_code == 404
    assert Agent.objects.get(name="bot").model == "claude-sonnet-4-5"

    response = owner_client.patch(f"{URL}/bot", {"model": "claude-opus-4-1"}, format="json")
    assert response.status_code == 200
    assert response.json()["model"] == "claude-opus-4-1"
    response = admin_client_api.patch(f"{URL}/bot", {"use_platform_api_key": False}, format="json")
    assert response.json()["use_platform_api_key"] is False
    assert owner_client.delete(f"{URL}/bot").status_code == 204
    assert not Agent.objects.exists()


def test_update_rejects_bad_input_and_changes_nothing(
    owner_client: APIClient, owner: object
) -> None:
    AgentFactory.create(name="bot", owner=owner, runtime="claude-code")
    response = owner_client.patch(f"{URL}/bot", {"runtime": "gpt", "model": "m"}, format="json")
    assert response.status_code == 400
    agent = Agent.objects.get(name="bot")
    assert (agent.runtime, agent.model) == ("claude-code", "claude-sonnet-4-5")


def test_unknown_agent_is_404(admin_client_api: APIClient) -> None:
    assert admin_client_api.get(f"{URL}/nobody").status_code == 404
    assert admin_client_api.delete(f"{URL}/nobody").status_code == 404


class TestAutoAssign:
    """Creating an agent through the API gives it the best-ranked plan by headroom."""

    def test_a_new_agent_gets_the_roomier_subscription(self, owner_client: APIClient) -> None:
        from subscriptions.headroom.store import snapshots_write
        from tests.headroom.readings import reading
        from tests.subscriptions.factories import SubscriptionFactory
        from trinity import clock

        fuller = SubscriptionFactory.create(name="a-fuller")
        roomier = SubscriptionFactory.create(name="b-roomier")
        now = clock.now()
        snapshots_write(
            {
                fuller.pk: reading(seven_day=65.0, now=now),
                roomier.pk: reading(seven_day=8.0, now=now),
            }
        )
        response = owner_client.post(URL, {"name": "bot"}, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["subscription"] == {"id": roomier.pk, "name": "b-roomier"}

    def test_auto_assign_can_be_declined(self, owner_client: APIClient) -> None:
        from tests.subscriptions.factories import SubscriptionFactory

        SubscriptionFactory.create(name="only")
        response = owner_client.post(URL, {"name": "bot", "auto_assign": False}, format="json")
        assert response.status_code == 201
        assert response.json()["subscription"] is None


def test_lifecycle_endpoints_are_for_the_owner_and_admins(
    owner_client: APIClient, other_client: APIClient, admin_client_api: APIClient, owner: object
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    for path in ("start", "stop"):
        assert other_client.post(f"{URL}/bot/{path}").status_code == 404
    assert other_client.get(f"{URL}/bot/health").status_code == 404
    for client in (owner_client, admin_client_api):
        health = client.get(f"{URL}/bot/health")
        assert health.status_code == 200
        assert health.json() == {"state": "stopped", "alive": False}
    stopped = owner_client.post(f"{URL}/bot/stop")
    assert stopped.status_code == 200 and stopped.json()["process_state"] == "stopped"
    assert "shared_secret" not in stopped.content.decode()


class TestStart:
    """POST …/start answers 503 for a start that failed the expected way (the runtime
    could not bring the server up) and lets anything else fail loudly as a 500."""

    def test_a_server_that_refuses_to_boot_answers_503_with_the_failed_state(
        self, owner_client: APIClient, owner: object, settings: Any, tmp_path: Path
    ) -> None:
        settings.VAR_DIR = tmp_path
        # A real agent server process that exits at boot: anthropic-api needs a model.
        AgentFactory.create(name="bot", owner=owner, runtime="anthropic-api", model="")
        response = owner_client.post(f"{URL}/bot/start")
        assert response.status_code == 503, response.content
        data = response.json()
        assert data["process_state"] == "failed"
        assert "exited with 2 at startup" in data["process_detail"]
        assert Agent.objects.get(name="bot").process_state == "failed"

    def test_a_bug_on_the_start_path_is_a_500_with_its_traceback_logged(
        self,
        owner: User,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        from agents import lifecycle

        def broken_spawn_spec(agent: Agent) -> Any:
            # Stands in for a programming error on the start path (the bug kind a
            # broad except used to turn into an unexplained 503).
            raise KeyError("a bug on the start path")

        monkeypatch.setattr(lifecycle, "spawn_spec", broken_spawn_spec)
        AgentFactory.create(name="bot", owner=owner)
        client = APIClient(raise_request_exception=False)
        client.force_login(owner)
        with caplog.at_level(logging.ERROR, logger="django.request"):
            response = client.post(f"{URL}/bot/start")
        assert response.status_code == 500
        logged = [r for r in caplog.records if r.name == "django.request" and r.exc_info]
        assert logged, "the bug must reach the log with its traceback"
        exc_info = logged[0].exc_info
        assert exc_info is not None and exc_info[0] is KeyError
        assert Agent.objects.get(name="bot").process_state == "stopped"
