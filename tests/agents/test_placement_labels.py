"""Per-agent node placement labels (``Agent.placement``): written through the agents
API by the owner or an admin, every bad shape refused with a 400 that names the label
and stores nothing, a change restarting the agent, and each update in the audit log's
diff. What the swarm runtime makes of them is pinned with the runtime."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from agents.models import Agent
from tests.agents.factories import AgentFactory
from trinity.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

URL = "/api/agents"
GPU_LESS = {"trinity.pool": "gpu-less"}
MEGABYTE = "x" * 1_000_000

VALID = [
    pytest.param({}, id="none"),
    pytest.param(GPU_LESS, id="one label"),
    pytest.param({"a": "B"}, id="one character each"),
    pytest.param({"a" * 63: "Z" * 63}, id="63 characters each"),
    pytest.param({"a1.b-c_d": "X.y-z_9"}, id="every character allowed"),
    pytest.param({f"l{i}": f"v{i}" for i in range(8)}, id="eight labels"),
]

# (what it is, the placement, the label its error names or None)
INVALID: list[Any] = [
    pytest.param("trinity.pool=gpu-less", None, id="a string"),
    pytest.param([["trinity.pool", "gpu-less"]], None, id="a list"),
    pytest.param(None, None, id="null"),
    pytest.param({f"l{i}": "v" for i in range(9)}, None, id="nine labels"),
    pytest.param({"trinity.pool": 1}, "trinity.pool", id="a number"),
    pytest.param({"trinity.pool": True}, "trinity.pool", id="a boolean"),
    pytest.param({"trinity.pool": None}, "trinity.pool", id="a null value"),
    pytest.param({"trinity.pool": {"x": "y"}}, "trinity.pool", id="an object value"),
    pytest.param({"trinity.pool": ["gpu"]}, "trinity.pool", id="a list value"),
    pytest.param({"trinity.pool": ""}, "trinity.pool", id="an empty value"),
    pytest.param({"": "gpu-less"}, "", id="an empty name"),
    pytest.param({"trinity.pool": "gpu==less"}, "trinity.pool", id="== in the value"),
    pytest.param({"trinity.pool": "=gpu"}, "trinity.pool", id="= leading the value"),
    pytest.param({"trinity.pool==gpu": "x"}, "trinity.pool==gpu", id="== in the name"),
    pytest.param({"trinity.pool!": "x"}, "trinity.pool!", id="!= in the name"),
    pytest.param(
        {"trinity.pool": "gpu,node.role==manager"}, "trinity.pool", id="a second constraint"
    ),
    pytest.param({"trinity.pool": "gpu less"}, "trinity.pool", id="a space"),
    pytest.param({"trinity.pool": " gpu-less"}, "trinity.pool", id="a padded value"),
    pytest.param({"trinity pool": "x"}, "trinity pool", id="a space in the name"),
    pytest.param({"trinity.pool": '"gpu"'}, "trinity.pool", id="double quotes"),
    pytest.param({"trinity.pool": "gpu'less"}, "trinity.pool", id="a single quote"),
    pytest.param({"trinity.pool": "gpu\nnode.role==manager"}, "trinity.pool", id="a line break"),
    pytest.param({"trinity.pool": "gpu-less\n"}, "trinity.pool", id="a trailing line break"),
    pytest.param({"trinity.pool\n": "gpu-less"}, "trinity.pool\n", id="a name's line break"),
    pytest.param({"trinity.pool": "gpu\x00"}, "trinity.pool", id="a NUL character"),
    pytest.param({"trinity.pool": "evil\u202egnp"}, "trinity.pool", id="a bidi override"),
    pytest.param({"trinity.pool": "gpü"}, "trinity.pool", id="a non-ASCII value"),
    pytest.param({"Trinity.pool": "x"}, "Trinity.pool", id="an upper-case name"),
    pytest.param({".pool": "x"}, ".pool", id="a name starting with a dot"),
    pytest.param({"pool-": "x"}, "pool-", id="a name ending with a dash"),
    pytest.param({"pool": "-gpu"}, "pool", id="a value starting with a dash"),
    pytest.param({"pool": "gpu."}, "pool", id="a value ending with a dot"),
    pytest.param({"a" * 64: "x"}, "a" * 64, id="a 64-character name"),
    pytest.param({"pool": "x" * 64}, "pool", id="a 64-character value"),
    pytest.param({"pool": MEGABYTE}, "pool", id="a 1 MB value"),
]


def _refused(response: Any, label: str | None) -> str:
    """The placement error of a 400 (asserting it is one), checked to name ``label``
    (escaped, cut to 40 characters) and never to repeat a long value."""
    assert response.status_code == 400, response.content
    assert len(response.content) < 1000
    (message,) = response.json()["placement"]
    if label is not None:
        shown = ascii(label[:40])
        assert shown in message
    assert "x" * 64 not in message
    return str(message)


def test_a_new_agent_runs_anywhere_until_given_labels(owner_client: APIClient) -> None:
    response = owner_client.post(URL, {"name": "bot", "auto_assign": False}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["placement"] == {}
    assert Agent.objects.get(name="bot").placement == {}


@pytest.mark.parametrize("placement", VALID)
def test_a_valid_placement_round_trips_through_create_read_and_update(
    owner_client: APIClient, placement: dict[str, str]
) -> None:
    body = {"name": "bot", "auto_assign": False, "placement": placement}
    created = owner_client.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["placement"] == placement
    assert owner_client.get(f"{URL}/bot").json()["placement"] == placement
    assert Agent.objects.get(name="bot").placement == placement

    updated = owner_client.patch(f"{URL}/bot", {"placement": GPU_LESS}, format="json")
    assert updated.status_code == 200, updated.content
    assert updated.json()["placement"] == GPU_LESS
    listed = owner_client.get(URL).json()
    assert [a["placement"] for a in listed] == [GPU_LESS]
    assert Agent.objects.get(name="bot").placement == GPU_LESS


def test_an_update_replaces_the_whole_set_and_empty_clears_it(
    owner_client: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner, placement={"zone": "eu-1", **GPU_LESS})
    owner_client.patch(f"{URL}/bot", {"placement": {"zone": "eu-2"}}, format="json")
    assert Agent.objects.get(name="bot").placement == {"zone": "eu-2"}
    owner_client.patch(f"{URL}/bot", {"placement": {}}, format="json")
    assert Agent.objects.get(name="bot").placement == {}


def test_an_update_without_placement_keeps_it(owner_client: APIClient, owner: Any) -> None:
    AgentFactory.create(name="bot", owner=owner, placement=GPU_LESS)
    response = owner_client.patch(f"{URL}/bot", {"model": "claude-opus-4-1"}, format="json")
    assert response.status_code == 200, response.content
    assert Agent.objects.get(name="bot").placement == GPU_LESS


@pytest.mark.parametrize(("placement", "label"), INVALID)
def test_an_invalid_update_is_a_400_naming_the_label_and_stores_nothing(
    owner_client: APIClient, owner: Any, placement: object, label: str | None
) -> None:
    agent = AgentFactory.create(name="bot", owner=owner, placement={"zone": "eu-1"})
    before = Agent.objects.filter(pk=agent.pk).values().get()
    response = owner_client.patch(f"{URL}/bot", {"placement": placement}, format="json")
    _refused(response, label)
    assert Agent.objects.filter(pk=agent.pk).values().get() == before


@pytest.mark.parametrize(("placement", "label"), INVALID)
def test_an_invalid_create_is_a_400_naming_the_label_and_creates_nothing(
    owner_client: APIClient, placement: object, label: str | None
) -> None:
    body = {"name": "bot", "auto_assign": False, "placement": placement}
    _refused(owner_client.post(URL, body, format="json"), label)
    assert not Agent.objects.exists()


def test_the_errors_say_what_is_wrong_in_words(owner_client: APIClient, owner: Any) -> None:
    AgentFactory.create(name="bot", owner=owner)

    def error(placement: object) -> str:
        response = owner_client.patch(f"{URL}/bot", {"placement": placement}, format="json")
        return _refused(response, None)

    assert error("x").startswith("Placement is an object of node label names to values")
    assert error({f"l{i}": "v" for i in range(9)}) == "At most 8 labels (9 given)."
    assert error({"trinity.pool": 1}) == "Label 'trinity.pool': the value is text, not a number."
    assert error({"Pool": "x"}).startswith("Label name 'Pool': 1 to 63 lower-case letters")
    assert error({"pool": "a==b"}).startswith("Label 'pool': the value is 1 to 63 letters")
    # A long or hostile name is cut and escaped; a value is never repeated.
    assert error({"k" * 500: "v"}).startswith(f"Label name '{'k' * 40}'…: 1 to 63")
    assert "\\u202e" in error({"evil\u202egnp": "v"})
    assert "secret-ish" not in error({"pool": "secret-ish value"})


def test_the_owner_and_an_admin_set_placement_another_operator_cannot(
    owner_client: APIClient, other_client: APIClient, admin_client_api: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    denied = other_client.patch(f"{URL}/bot", {"placement": GPU_LESS}, format="json")
    assert denied.status_code == 404
    named = other_client.patch(f"{URL}/bot?owner=owner", {"placement": GPU_LESS}, format="json")
    assert named.status_code == 404
    assert Agent.objects.get(name="bot").placement == {}

    response = owner_client.patch(f"{URL}/bot", {"placement": GPU_LESS}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["placement"] == GPU_LESS
    zone = {"zone": "eu-1"}
    response = admin_client_api.patch(f"{URL}/bot?owner=owner", {"placement": zone}, format="json")
    assert response.status_code == 200, response.content
    assert Agent.objects.get(name="bot").placement == zone


def test_another_operators_create_of_the_name_places_only_their_own_agent(
    owner_client: APIClient, other_client: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner, placement=GPU_LESS)
    body = {"name": "bot", "auto_assign": False, "placement": {"trinity.pool": "gpu"}}
    assert other_client.post(URL, body, format="json").status_code == 201
    assert Agent.objects.get(name="bot", owner=owner).placement == GPU_LESS
    assert owner_client.get(f"{URL}/bot").json()["placement"] == GPU_LESS


def test_an_update_shows_the_placement_in_the_audit_diff(
    owner_client: APIClient, owner: Any
) -> None:
    agent = AgentFactory.create(name="bot", owner=owner, placement={"zone": "eu-1"})
    response = owner_client.patch(f"{URL}/bot", {"placement": GPU_LESS}, format="json")
    assert response.status_code == 200, response.content
    entry = AuditEntry.objects.get(action="agent.update")
    assert entry.object_id == str(agent.pk)
    assert entry.changes["placement"] == [{"zone": "eu-1"}, GPU_LESS]


def test_a_refused_update_leaves_no_placement_change_in_the_audit_log(
    owner_client: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner, placement={"zone": "eu-1"})
    response = owner_client.patch(f"{URL}/bot", {"placement": {"zone": "a==b"}}, format="json")
    assert response.status_code == 400
    assert all("placement" not in e.changes for e in AuditEntry.objects.all())


def test_the_models_validator_refuses_what_the_api_refuses(owner: Any) -> None:
    # The admin form validates the field through the model (``clean_fields``).
    agent = AgentFactory.create(name="bot", owner=owner)
    field = Agent._meta.get_field("placement")
    with pytest.raises(ValidationError) as refused:
        field.clean({"trinity.pool": "gpu,node.role==manager"}, agent)
    assert refused.value.messages == [
        "Label 'trinity.pool': the value is 1 to 63 letters, digits, '.', '-' or '_', "
        "starting and ending with a letter or digit."
    ]
    assert field.clean(GPU_LESS, agent) == GPU_LESS
