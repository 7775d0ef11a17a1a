from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory, plan_token

pytestmark = pytest.mark.django_db

URL = "/api/subscriptions"


def _body(**overrides: str) -> dict[str, str]:
    body = {"name": "max-a", "token": plan_token(), "provider": "anthropic", "plan_type": "max-20x"}
    body.update(overrides)
    return body


class TestRegister:
    def test_admin_registers_and_sees_only_the_fingerprint(
        self, admin_client_api: APIClient
    ) -> None:
        body = _body()
        response = admin_client_api.post(URL, body, format="json")
        assert response.status_code == 201, response.content
        data = response.json()
        assert data["token_fingerprint"] == body["token"][-4:]
        assert "token" not in data
        assert body["token"] not in response.content.decode()
        assert data["billing_class"] == "plan"
        stored = Subscription.objects.get(name="max-a")
        assert stored.token.reveal() == body["token"]

    def test_posting_an_existing_name_replaces_the_token(self, admin_client_api: APIClient) -> None:
        admin_client_api.post(URL, _body(), format="json")
        new = plan_token()
        response = admin_client_api.post(URL, _body(token=new, plan_type="pro"), format="json")
        assert response.status_code == 200
        assert Subscription.objects.count() == 1
        stored = Subscription.objects.get()
        assert stored.token.reveal() == new
        assert stored.plan_type == "pro"
        assert response.json()["token_fingerprint"] == new[-4:]

    @pytest.mark.parametrize("client_name", ["owner_client", "other_client", "anon_client"])
    def test_non_admins_are_refused_before_anything_is_written(
        self, request: pytest.FixtureRequest, client_name: str
    ) -> None:
        client: APIClient = request.getfixturevalue(client_name)
        response = client.post(URL, _body(), format="json")
        assert response.status_code in (401, 403)
        if client_name != "anon_client":
            assert response.status_code == 403
        assert not Subscription.objects.exists()

    def test_an_api_key_is_refused_with_a_pointer_to_the_platform_key_setting(
        self, admin_client_api: APIClient
    ) -> None:
        key = "sk-ant-api03-" + "k" * 40
        response = admin_client_api.post(URL, _body(token=key), format="json")
        assert response.status_code == 400
        message = response.json()["token"][0]
        assert "API key" in message and "platform API key" in message
        assert key not in response.content.decode()
        assert not Subscription.objects.exists()

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"token": "hello"}, "token"),
            ({"token": ""}, "token"),
            ({"token": "sk-ant-oat01-has space " + "x" * 20}, "token"),
            ({"provider": "gemini"}, "provider"),
            ({"plan_type": "platinum"}, "plan_type"),
            ({"name": ""}, "name"),
            ({"provider": "openai-codex", "plan_type": "pro"}, "token"),  # a Claude token
            (
                {"provider": "openai-codex", "plan_type": "pro", "token": "sk-proj-" + "x" * 30},
                "token",
            ),
        ],
    )
    def test_bad_input_gets_a_message_per_field_and_writes_nothing(
        self, admin_client_api: APIClient, overrides: dict[str, str], field: str
    ) -> None:
        response = admin_client_api.post(URL, _body(**overrides), format="json")
        assert response.status_code == 400
        assert field in response.json()
        assert not Subscription.objects.exists()

    def test_a_codex_plan_token_is_accepted(self, admin_client_api: APIClient) -> None:
        jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLXBhcnQ"
        response = admin_client_api.post(
            URL, _body(provider="openai-codex", plan_type="pro", token=jwt), format="json"
        )
        assert response.status_code == 201, response.content

    def test_a_codex_plan_is_registered_from_the_auth_json_codex_login_wrote(
        self, admin_client_api: APIClient
    ) -> None:
        from tests.subscriptions.test_codex_credential import ACCESS, AUTH_JSON

        response = admin_client_api.post(
            URL, _body(provider="openai-codex", plan_type="pro", token=AUTH_JSON), format="json"
        )
        assert response.status_code == 201, response.content
        assert response.json()["token_fingerprint"] == ACCESS[-4:]
        assert "rt-0123456789abcdef" not in response.content.decode()
        assert ACCESS not in response.content.decode()
        stored = Subscription.objects.get().token.reveal()
        assert '"refresh_token":"rt-0123456789abcdef"' in stored
        assert '"account_id":"acct-1"' in stored

    def test_changing_the_provider_of_a_subscription_in_use_is_a_conflict(
        self, admin_client_api: APIClient
    ) -> None:
        subscription = SubscriptionFactory.create(name="max-a")
        AgentFactory.create(subscription=subscription)
        jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLXBhcnQ"
        response = admin_client_api.post(
            URL, _body(provider="openai-codex", plan_type="pro", token=jwt), format="json"
        )
        assert response.status_code == 409
        assert Subscription.objects.get().provider == "anthropic"


class TestList:
    def test_admin_sees_every_subscription_with_its_agents(
        self, admin_client_api: APIClient
    ) -> None:
        used = SubscriptionFactory.create(name="a")
        SubscriptionFactory.create(name="b")
        AgentFactory.create(name="one", subscription=used)
        AgentFactory.create(name="two", subscription=used)
        data = admin_client_api.get(URL).json()
        assert [s["name"] for s in data] == ["a", "b"]
        assert data[0]["agent_count"] == 2
        assert sorted(a["name"] for a in data[0]["agents"]) == ["one", "two"]
        assert data[1]["agent_count"] == 0

    def test_two_owners_agents_of_one_name_on_a_plan_are_listed_with_their_owners(
        self, admin_client_api: APIClient, owner: User, other_user: User
    ) -> None:
        """Names are unique per owner only: the admin's list tells the owner's "bot"
        from the other user's, so the panel can address each (``?owner=``)."""
        plan = SubscriptionFactory.create(name="shared")
        AgentFactory.create(name="bot", owner=owner, subscription=plan)
        AgentFactory.create(name="bot", owner=other_user, subscription=plan)
        listed = admin_client_api.get(URL).json()[0]["agents"]
        assert sorted((a["name"], a["owner"]) for a in listed) == [
            ("bot", "other"),
            ("bot", "owner"),
        ]
        pressure = admin_client_api.get("/api/agents/subscription-pressure").json()
        assert sorted((a["name"], a["owner"]) for a in pressure["subscriptions"][0]["agents"]) == [
            ("bot", "other"),
            ("bot", "owner"),
        ]
        # Each is unassigned by name and owner: exactly that one, never a 409.
        gone = admin_client_api.delete("/api/subscriptions/agents/bot?owner=other")
        assert gone.status_code == 200, gone.content
        left = admin_client_api.get(URL).json()[0]["agents"]
        assert left == [{"name": "bot", "owner": "owner"}]

    def test_a_non_admin_sees_the_shared_pool_but_only_their_own_agents_on_it(
        self, owner_client: APIClient, owner: object, other_client: APIClient
    ) -> None:
        mine = SubscriptionFactory.create(name="mine")
        theirs = SubscriptionFactory.create(name="not-mine")
        AgentFactory.create(name="my-agent", owner=owner, subscription=mine)
        AgentFactory.create(name="their-agent", subscription=theirs)
        AgentFactory.create(name="their-other", subscription=mine)
        data = owner_client.get(URL).json()
        assert [(s["name"], s["agents"], s["agent_count"]) for s in data] == [
            ("mine", [{"name": "my-agent", "owner": "owner"}], 1),
            ("not-mine", [], 0),
        ]
        data = other_client.get(URL).json()
        assert [(s["name"], s["agents"], s["agent_count"]) for s in data] == [
            ("mine", [], 0),
            ("not-mine", [], 0),
        ]
        assert mine.token is not None and theirs.token is not None
        assert mine.token.reveal() not in str(data) and theirs.token.reveal() not in str(data)

    def test_anonymous_gets_401_or_403(self, anon_client: APIClient) -> None:
        assert anon_client.get(URL).status_code in (401, 403)

    def test_token_auth_works(self, admin_user: User) -> None:
        from knox.models import AuthToken

        _, key = AuthToken.objects.create(user=admin_user)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert client.get(URL).status_code == 200


class TestDetail:
    def test_get_and_delete_by_admin(self, admin_client_api: APIClient) -> None:
        subscription = SubscriptionFactory.create()
        agent = AgentFactory.create(subscription=subscription)
        assert admin_client_api.get(f"{URL}/{subscription.pk}").json()["name"] == subscription.name
        assert admin_client_api.delete(f"{URL}/{subscription.pk}").status_code == 204
        assert not Subscription.objects.exists()
        agent.refresh_from_db()
        assert agent.subscription is None  # SET_NULL

    def test_an_operator_reads_a_pool_subscription_but_cannot_delete_it(
        self, owner_client: APIClient, owner: object, other_client: APIClient
    ) -> None:
        subscription = SubscriptionFactory.create()
        AgentFactory.create(name="mine", owner=owner, subscription=subscription)
        assert owner_client.get(f"{URL}/{subscription.pk}").json()["agents"] == [
            {"name": "mine", "owner": "owner"}
        ]
        assert owner_client.delete(f"{URL}/{subscription.pk}").status_code == 403
        other = other_client.get(f"{URL}/{subscription.pk}").json()
        assert (other["agents"], other["agent_count"]) == ([], 0)
        assert other_client.delete(f"{URL}/{subscription.pk}").status_code == 403
        assert Subscription.objects.exists()

    def test_unknown_id_is_404(self, admin_client_api: APIClient) -> None:
        assert admin_client_api.get(f"{URL}/999").status_code == 404
        assert admin_client_api.delete(f"{URL}/999").status_code == 404


class TestAssignment:
    def test_owner_assigns_and_unassigns_their_agent(
        self, owner_client: APIClient, owner: object
    ) -> None:
        agent = AgentFactory.create(name="bot", owner=owner)
        subscription = SubscriptionFactory.create()
        # Visible to the owner: another of their agents runs on it.
        AgentFactory.create(name="sibling", owner=owner, subscription=subscription)
        response = owner_client.put(
            f"{URL}/agents/bot", {"subscription_id": subscription.pk}, format="json"
        )
        assert response.status_code == 200, response.content
        assert response.json() == {"agent": "bot", "subscription_id": subscription.pk}
        agent.refresh_from_db()
        assert agent.subscription_id == subscription.pk
        assert owner_client.delete(f"{URL}/agents/bot").status_code == 200
        agent.refresh_from_db()
        assert agent.subscription_id is None

    def test_admin_assigns_anyones_agent(self, admin_client_api: APIClient) -> None:
        agent = AgentFactory.create(name="bot")
        subscription = SubscriptionFactory.create()
        response = admin_client_api.put(
            f"{URL}/agents/bot", {"subscription_id": subscription.pk}, format="json"
        )
        assert response.status_code == 200
        agent.refresh_from_db()
        assert agent.subscription_id == subscription.pk

    def test_another_user_cannot_touch_the_agent(
        self, other_client: APIClient, owner: object
    ) -> None:
        first = SubscriptionFactory.create()
        agent = AgentFactory.create(name="bot", owner=owner, subscription=first)
        second = SubscriptionFactory.create()
        put = other_client.put(f"{URL}/agents/bot", {"subscription_id": second.pk}, format="json")
        assert put.status_code == 404
        assert other_client.delete(f"{URL}/agents/bot").status_code == 404
        agent.refresh_from_db()
        assert agent.subscription_id == first.pk

    @pytest.mark.parametrize(
        ("body", "status"),
        [
            ({}, 400),
            ({"subscription_id": "x"}, 400),
            ({"subscription_id": 0}, 400),
            ({"subscription_id": 999}, 404),
        ],
    )
    def test_bad_assignment_input(
        self, owner_client: APIClient, owner: object, body: dict[str, object], status: int
    ) -> None:
        AgentFactory.create(name="bot", owner=owner)
        response = owner_client.put(f"{URL}/agents/bot", body, format="json")
        assert response.status_code == status
        assert Agent.objects.get(name="bot").subscription_id is None

    def test_a_codex_subscription_cannot_serve_a_claude_agent(
        self, admin_client_api: APIClient, owner: object
    ) -> None:
        AgentFactory.create(name="bot", owner=owner)
        codex = SubscriptionFactory.create(provider="openai-codex", plan_type="pro")
        response = admin_client_api.put(
            f"{URL}/agents/bot", {"subscription_id": codex.pk}, format="json"
        )
        assert response.status_code == 400
        assert "subscription_id" in response.json()

    def test_unknown_agent_is_404(self, admin_client_api: APIClient) -> None:
        subscription = SubscriptionFactory.create()
        response = admin_client_api.put(
            f"{URL}/agents/nobody", {"subscription_id": subscription.pk}, format="json"
        )
        assert response.status_code == 404


class TestAssignmentVisibility:
    """The pool is shared: an owner may assign any of its plans to their own agent (the
    walk may serve the agent there anyway); nobody assigns another owner's agent; a
    missing id answers 404 and writes nothing."""

    def test_owner_assigns_any_pool_plan_other_user_nothing_admin_anything(
        self,
        owner_client: APIClient,
        other_client: APIClient,
        admin_client_api: APIClient,
        owner: User,
    ) -> None:
        used = SubscriptionFactory.create(name="used-by-another")
        AgentFactory.create(name="theirs", subscription=used)
        unused = SubscriptionFactory.create(name="unused")
        bot = AgentFactory.create(name="bot", owner=owner)

        mine = owner_client.put(f"{URL}/agents/bot", {"subscription_id": used.pk}, format="json")
        assert mine.status_code == 200, mine.content
        assert (
            other_client.put(
                f"{URL}/agents/bot", {"subscription_id": unused.pk}, format="json"
            ).status_code
            == 404
        )
        bot.refresh_from_db()
        assert bot.subscription_id == used.pk
        admin = admin_client_api.put(
            f"{URL}/agents/bot", {"subscription_id": unused.pk}, format="json"
        )
        assert admin.status_code == 200, admin.content
        bot.refresh_from_db()
        assert bot.subscription_id == unused.pk

    def test_a_refused_assignment_writes_nothing_and_schedules_nothing(
        self,
        owner_client: APIClient,
        owner: User,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        current = SubscriptionFactory.create(name="current")
        bot = AgentFactory.create(name="bot", owner=owner, subscription=current)
        missing_id = current.pk + 1000
        before = Agent.objects.values().get(pk=bot.pk)

        with django_capture_on_commit_callbacks() as callbacks:
            response = owner_client.put(
                f"{URL}/agents/bot", {"subscription_id": missing_id}, format="json"
            )
        assert response.status_code == 404
        assert Agent.objects.values().get(pk=bot.pk) == before
        assert callbacks == []  # no credentials hot-reload or recreate was queued
