"""What an entry keeps of a row (secrets by fingerprint, everything else as JSON), the
diff of two states, and a route nobody registered still being recorded."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client, override_settings

from tests.agents.factories import AgentFactory
from tests.gateway.factories import GatewayKeyFactory
from tests.subscriptions.factories import SubscriptionFactory
from trinity.audit.models import AuditEntry
from trinity.audit.rows import changes, row_state, secret_mark
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db

PLAN_TOKEN = "sk-ant-oat01-ROWScanary000000000000000000000000wxyz"


@pytest.mark.parametrize(
    ("value", "mark"),
    [
        (None, None),
        ("", None),
        ("short", "set"),
        ("long-enough-abcd", "…abcd"),
        (Secret("x" * 8 + "9876"), "…9876"),
    ],
)
def test_a_secret_is_kept_by_its_fingerprint(value: object, mark: str | None) -> None:
    assert secret_mark(value) == mark


def test_encrypted_and_secret_named_fields_keep_only_a_fingerprint() -> None:
    plan = SubscriptionFactory.create(token=Secret(PLAN_TOKEN))
    state = row_state(plan)
    assert state["token"] == "…wxyz"
    assert state["token_fingerprint"] == "wxyz"  # already a fingerprint: kept as it is
    key = GatewayKeyFactory.create(daily_tokens=1000)
    key_state = row_state(key)
    assert key_state["digest"] == f"…{key.digest[-4:]}"
    assert key_state["prefix"] == key.prefix  # the key's shown start, not a secret
    assert key_state["daily_tokens"] == 1000  # a count named after tokens
    agent = AgentFactory.create(key_budget_daily_usd=Decimal("2.50"), use_platform_api_key=True)
    agent_state = row_state(agent)
    assert agent_state["use_platform_api_key"] is True  # a switch named after a key
    assert agent_state["key_budget_daily_usd"] == "2.50"
    assert PLAN_TOKEN not in str(state) + str(key_state) + str(agent_state)


def test_changes_list_each_differing_field_before_and_after() -> None:
    assert changes({"a": 1, "b": 2}, {"a": 1, "b": 3}) == {"b": [2, 3]}
    assert changes(None, {"a": 1}) == {"a": [None, 1]}
    assert changes({"a": 1}, None) == {"a": [1, None]}
    assert changes({"a": 1}, {"a": 1}) == {}


@override_settings(ROOT_URLCONF="tests.trinity.audit.unregistered_urls")
def test_a_route_nobody_registered_is_recorded_by_its_name_and_arguments() -> None:
    before = AuditEntry.objects.count()
    assert Client().post("/poke/left", REMOTE_ADDR="198.51.100.4").status_code == 204
    assert Client().get("/poke/left").status_code == 204  # a read: nothing
    [entry] = AuditEntry.objects.order_by("id")[before:]
    assert (entry.action, entry.object_type, entry.object_id, entry.address) == (
        "poke.create",
        "poke",
        "thing=left",
        "198.51.100.4",
    )
    assert (entry.actor_kind, entry.source) == ("anonymous", "panel")
