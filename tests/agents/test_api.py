from __future__ import annotations

import pytest
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
    assert data["use_platform_api_key"] is True
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


def test_a_taken_name_is_a_conflict(owner_client: APIClient) -> None:
    AgentFactory.create(name="bot")
    response = owner_client.post(URL, {"name": "bot"}, format="json")
    assert response.status_code == 409
    assert "name" in response.json()
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
