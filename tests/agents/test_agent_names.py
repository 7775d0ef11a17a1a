"""Agent names are unique per owner and tell nobody about another owner's agents.

Two operators may each have a "bot": each creates it (201), sees and addresses only
their own, and both run real turns (real agent servers on the local runtime, the real
Claude Code CLI, the simulator), each on resources of its own runtime key. A name
another operator uses answers exactly as a free name does, on every endpoint that
takes a name (enumerated from the schema). An admin addresses their own first, else
the only agent of the name, else gets 409 ``ambiguous`` saying how to pick
(``?owner=``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from agents.models import Agent
from agents.runtimes import local
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory, UserFactory
from tests.execution.support import messages_sent, register_plan

pytestmark = pytest.mark.django_db

URL = "/api/agents"


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def alice(db: None) -> User:
    return UserFactory.create(username="alice")


@pytest.fixture
def bob(db: None) -> User:
    return UserFactory.create(username="bob")


@pytest.fixture
def root(db: None) -> User:
    return UserFactory.create(username="root", is_staff=True, is_superuser=True)


def _create(client: APIClient, name: str) -> Any:
    return client.post(URL, {"name": name, "autostart": False}, format="json")


def test_a_second_operator_creates_a_name_the_first_uses_and_neither_sees_the_other(
    alice: User, bob: User
) -> None:
    first = _create(_client(alice), "bot")
    second = _create(_client(bob), "bot")
    assert (first.status_code, second.status_code) == (201, 201), second.content
    assert (first.json()["owner"], second.json()["owner"]) == ("alice", "bob")

    for user in (alice, bob):
        client = _client(user)
        listed = client.get(URL).json()
        assert [(a["name"], a["owner"]) for a in listed] == [("bot", user.username)]
        assert client.get(f"{URL}/bot").json()["owner"] == user.username
    # Each has resources of its own: the first keeps the name as its key, the second
    # a key of its own that is nobody's name.
    keys = dict(Agent.objects.values_list("owner__username", "runtime_key"))
    assert keys["alice"] == "bot"
    assert re.fullmatch(r"bot-[0-9a-f]{10}", keys["bob"]), keys
    # Their own name again is a conflict, for each of them.
    assert _create(_client(bob), "bot").status_code == 409


def _name_paths(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (method, path) of the API that takes an agent's name."""
    return [
        (method, path)
        for path, operations in schema["paths"].items()
        if "{name}" in path
        for method in operations
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def test_a_name_another_operator_uses_answers_exactly_as_a_free_name(
    alice: User, bob: User, root: User
) -> None:
    AgentFactory.create(name="taken-name", owner=alice)
    schema = _client(root).get("/api/schema/", {"format": "json"}).json()
    paths = _name_paths(schema)
    assert len(paths) >= 12, paths  # detail, start, stop, health, task, chat, schedules...
    client = _client(bob)
    for method, path in paths:
        answers = []
        for name in ("taken-name", "freely-name"):
            url = path.replace("{name}", name).replace("{schedule}", "nightly")
            response = getattr(client, method)(url, {}, format="json")
            answers.append((response.status_code, response.content.decode().replace(name, "N")))
        assert answers[0] == answers[1], (method, path, answers)
        assert answers[0][0] in (400, 404), (method, path, answers)
    # Asking for it by its owner changes nothing for an operator.
    for owner in ("alice", "nobody"):
        response = client.get(f"{URL}/taken-name", {"owner": owner})
        assert response.status_code == 404
    # Creating it is a 201, as for any free name, and alice's agent is untouched.
    assert _create(client, "taken-name").status_code == 201
    assert Agent.objects.get(owner=alice, name="taken-name").runtime_key == "taken-name"


def test_an_admin_addresses_their_own_first_then_the_only_one_else_asks_whose(
    alice: User, bob: User, root: User
) -> None:
    admin = _client(root)
    AgentFactory.create(name="solo", owner=alice)
    assert admin.get(f"{URL}/solo").json()["owner"] == "alice"

    AgentFactory.create(name="bot", owner=alice)
    AgentFactory.create(name="bot", owner=bob)
    ambiguous = admin.get(f"{URL}/bot")
    assert ambiguous.status_code == 409
    assert ambiguous.json() == {
        "detail": "2 agents are named 'bot' (owners: alice, bob); add ?owner=<username> "
        "to pick one.",
        "code": "ambiguous",
    }
    assert admin.post(f"{URL}/bot/task", {"message": "hi"}, format="json").status_code == 409
    assert admin.get(f"{URL}/bot", {"owner": "bob"}).json()["owner"] == "bob"
    assert admin.get(f"{URL}/bot", {"owner": "nobody"}).status_code == 404
    assert admin.get(f"{URL}/bot/schedules", {"owner": "alice"}).status_code == 200

    AgentFactory.create(name="bot", owner=root)
    assert admin.get(f"{URL}/bot").json()["owner"] == "root"  # their own first
    assert admin.get(f"{URL}/bot", {"owner": "alice"}).json()["owner"] == "alice"
    assert [a["owner"] for a in admin.get(URL).json() if a["name"] == "bot"] == [
        "alice",
        "bob",
        "root",
    ]


def test_list_filters_by_name_mean_the_callers_agent(alice: User, bob: User, root: User) -> None:
    from execution.models import Execution
    from trinity import clock
    from trinity.notifications import notification_send

    turn_of = {}
    for owner in (alice, bob):
        agent = AgentFactory.create(name="bot", owner=owner)
        turn_of[owner.username] = str(
            Execution.objects.create(
                agent=agent, agent_name="bot", message="hi", created_at=clock.now()
            ).pk
        )
        notification_send(
            kind="k", title=f"of-{owner.username}", agent_name="bot", agent_id=agent.pk,
            now=clock.now(),
        )  # fmt: skip
    for user in (alice, bob):
        client = _client(user)
        turns = client.get("/api/executions", {"agent": "bot"}).json()["results"]
        assert [t["id"] for t in turns] == [turn_of[user.username]]
        notes = client.get("/api/notifications", {"agent": "bot"}).json()["results"]
        assert [n["title"] for n in notes] == [f"of-{user.username}"]
    admin = _client(root)
    both = admin.get("/api/executions", {"agent": "bot"}).json()["results"]
    assert sorted(t["id"] for t in both) == sorted(turn_of.values())
    only = admin.get("/api/executions", {"agent": "bot", "owner": "bob"}).json()["results"]
    assert [t["id"] for t in only] == [turn_of["bob"]]


def test_routing_explain_names_the_owners_when_several_use_the_name(alice: User, bob: User) -> None:
    AgentFactory.create(name="bot", owner=alice)
    AgentFactory.create(name="bot", owner=bob)
    with pytest.raises(CommandError, match=r"owners: alice, bob\); add --owner USERNAME"):
        call_command("routing_explain", "bot")
    with pytest.raises(CommandError, match="No agent named 'bot' owned by 'carol'"):
        call_command("routing_explain", "bot", owner="carol")
    call_command("routing_explain", "bot", owner="bob", json=True)


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_two_operators_bots_each_run_a_real_turn_on_their_own_server(
    control: SimulatorControl, alice: User, bob: User, tmp_path: Path
) -> None:
    plan, _ = register_plan(control, "plan-a")
    for user in (alice, bob):
        created = _create(_client(user), "bot")
        assert created.status_code == 201, created.content
        agent = Agent.objects.get(owner=user, name="bot")
        subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)

    answers = {}
    for user in (alice, bob):
        response = _client(user).post(f"{URL}/bot/task", {"message": "say hi"}, format="json")
        assert response.status_code == 200, response.content
        answers[user.username] = response.json()
        assert answers[user.username]["status"] == "succeeded"
    assert [status for _, status in messages_sent(control)] == [200, 200]

    agents = {a.owner.username: a for a in Agent.objects.select_related("owner")}
    assert agents["alice"].endpoint != agents["bob"].endpoint
    for owner, agent in agents.items():
        # The server's home is its runtime key's, and each turn is its own agent's.
        assert agent.endpoint == f"unix://{local.socket_path(agent.runtime_key)}"
        assert local.agent_home(agent.runtime_key).is_dir()
        turns = _client(agent.owner).get("/api/executions").json()["results"]
        assert [t["id"] for t in turns] == [answers[owner]["id"]]
