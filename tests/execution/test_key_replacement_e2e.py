"""A key refusal belongs to the key it was made with, end to end: the REST API, a real
agent server running the real Claude Code CLI and the provider simulator. A replaced
key starts clean at once; the refused key stays closed, and the explainer and the
Settings endpoint say which key (by its last 4) refused and when it reopens."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.execution.support import agent_on, messages_sent, register_plan, task

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _new_key(control: SimulatorControl, label: str, credit_usd: float) -> str:
    value = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(value, kind="api_key", label=label, credit_usd=credit_usd)
    return value


def test_a_replaced_platform_key_serves_at_once_after_the_old_key_refused(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    a, a_token = register_plan(control, "plan-a")
    agent_on(owner, a)
    control.set_usage(a_token, "five_hour", percent=100)
    broke = _new_key(control, "broke-key", 0)
    put = admin_client_api.put("/api/settings/platform-api-key", {"key": broke}, format="json")
    assert put.status_code == 200, put.content

    refused = task(owner_client)
    assert refused["http_status"] == 429 and refused["error_code"] == "billing", refused
    event = RateLimitEvent.objects.get(credential_kind="api_key")
    assert event.credential_fingerprint == broke[-4:]
    # The Settings endpoint says which key refused and when it reopens.
    shown = admin_client_api.get("/api/settings/platform-api-key").json()
    assert shown["refusal"]["fingerprint"] == broke[-4:], shown
    assert shown["refusal"]["failure_kind"] == "auth"
    routing = owner_client.get("/api/agents/bot/routing").json()
    assert routing["key"]["closed"] == "refused_recently"
    assert routing["key"]["fingerprint"] == broke[-4:]
    assert any(f"key …{broke[-4:]}" in line for line in routing["summary"]), routing["summary"]

    funded = _new_key(control, "funded-key", 50)
    put = admin_client_api.put("/api/settings/platform-api-key", {"key": funded}, format="json")
    assert put.status_code == 200 and put.json()["refusal"] is None, put.content
    control.clear_requests()

    served = task(owner_client)
    assert served["http_status"] == 200, served
    assert served["served_by_kind"] == "api_key"
    # plan-a is known exhausted (routed around before dispatch); the new key serves.
    assert messages_sent(control) == [("funded-key", 200)]
    assert owner_client.get("/api/agents/bot/routing").json()["key"]["available"] is True
    assert broke not in str(shown) and funded not in str(served)
