"""An admin's "retry now", end to end: the REST API and ``manage.py``, real agent
servers running the real Claude Code CLI and the provider simulator. A key topped up
with credit, or a plan whose quota is back, serves the next turn once retried, instead
of waiting out its skip window; the retry is audited (who, when, which credential)."""

from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.execution.support import agent_on, messages_sent, register_plan, task
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_topped_up_key_serves_once_the_admin_retries_it(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    other_client: APIClient,
    admin_user: User,
    admin_client_api: APIClient,
) -> None:
    a, a_token = register_plan(control, "plan-a")
    agent_on(owner, a)
    control.set_usage(a_token, "five_hour", percent=100)
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=0)
    trinity_services.platform_api_key_set(key=key)
    assert task(owner_client)["http_status"] == 429

    control.add_credit(key, 50)  # topped up: the provider would serve it now
    assert task(owner_client)["http_status"] == 429  # still closed: refused recently

    url = "/api/settings/platform-api-key/retry"
    assert owner_client.post(url).status_code == 403
    assert other_client.post(url).status_code == 403
    retried = admin_client_api.post(url)
    assert retried.status_code == 200, retried.content
    assert retried.json() == {
        "credential": "api_key",
        "name": "platform API key",
        "fingerprint": key[-4:],
        "cleared": 1,
        "probe": "",
    }
    audit = Notification.objects.get(kind="credential_retry")
    assert audit.data["actor"] == admin_user.username and audit.data["fingerprint"] == key[-4:]
    assert key not in audit.title + audit.body + str(audit.data)
    assert admin_client_api.get("/api/settings/platform-api-key").json()["refusal"] is None

    control.clear_requests()
    served = task(owner_client)
    assert served["http_status"] == 200 and served["served_by_kind"] == "api_key", served
    assert messages_sent(control) == [("platform-key", 200)]


def test_a_plan_whose_quota_is_back_serves_once_the_admin_retries_it(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    admin_user: User,
    admin_client_api: APIClient,
) -> None:
    a, a_token = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, a, name="first")
    agent_on(owner, a, name="second")
    control.set_usage(a_token, "five_hour", percent=100)
    walked = task(owner_client, agent="first")
    assert [x["name"] for x in walked["attempts"]] == ["plan-a", "plan-b"]

    control.set_usage(a_token, "five_hour", percent=0)  # the provider serves it again
    routing = owner_client.get("/api/agents/second/routing").json()
    assert routing["assigned"]["refusing"] is True, routing["assigned"]

    url = f"/api/subscriptions/{a.pk}/retry"
    assert owner_client.post(url).status_code == 403
    retried = admin_client_api.post(url)
    assert retried.status_code == 200, retried.content
    assert retried.json()["cleared"] == 1 and retried.json()["probe"] == "ok", retried.json()
    assert not RateLimitEvent.objects.filter(subscription=a).exists()
    # The explainer shows the result: the plan serves again, by its fresh reading.
    routing = owner_client.get("/api/agents/second/routing").json()
    assert routing["assigned"]["refusing"] is False, routing["assigned"]
    assert routing["assigned"]["decided_by"] == "reading", routing["assigned"]

    control.clear_requests()
    served = task(owner_client, agent="second")
    assert [(x["name"], x["outcome"]) for x in served["attempts"]] == [("plan-a", "served")]
    audit = Notification.objects.get(kind="credential_retry")
    assert (audit.data["actor"], audit.data["name"]) == (admin_user.username, "plan-a")

    # The same from a shell, audited with the actor it names.
    out = StringIO()
    call_command("credential_retry", subscription="plan-a", actor="ops", stdout=out)
    assert out.getvalue().startswith("plan-a (…"), out.getvalue()
    assert "0 refusal(s) cleared" in out.getvalue()
    assert Notification.objects.filter(kind="credential_retry", data__actor="ops").count() == 1
