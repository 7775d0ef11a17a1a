"""A ChatGPT plan signed in with a device code from the panel: the REST flow against
the real simulator's device-code endpoints and device page (the browser's part is in
tests/browser/test_plan_sign_in_browser.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import time_machine
from django.test import override_settings
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from subscriptions.models import Subscription
from subscriptions.plan_sign_in.providers import poll_interval
from tests.agents.factories import UserFactory
from tests.conftest import _client_for
from trinity.audit.models import AuditEntry

START = "/api/subscriptions/sign-in/device"
DOWN = "http://127.0.0.1:9"


def start(client: APIClient, **over: str) -> Any:
    body = {"name": "gpt-device", "plan_type": "pro", **over}
    return client.post(START, body, format="json")


def poll(client: APIClient, flow: str) -> Any:
    return client.post(f"/api/subscriptions/sign-in/{flow}/poll")


def enter(started: dict[str, Any], decision: str = "approve") -> None:
    """What the admin does on the provider's device page: types the code, decides."""
    form = {"user_code": started["user_code"], "decision": decision}
    page = httpx.post(started["verification_url"], data=form, timeout=10)
    assert page.status_code == 200, page.text


@pytest.mark.django_db
def test_a_device_code_sign_in_waits_then_registers_the_codex_plan(
    sim: SimulatorControl, admin_client_api: APIClient, simulator: SimulatorProcess
) -> None:
    answer = start(admin_client_api)
    assert answer.status_code == 201, answer.json()
    started = answer.json()
    assert set(started) == {"flow", "user_code", "verification_url", "interval", "expires_at"}
    assert started["verification_url"] == simulator.base_url + "/codex/device"
    assert started["interval"] == 5  # the provider's "5"
    entries = AuditEntry.objects.count()
    pending = poll(admin_client_api, started["flow"])
    assert (pending.status_code, pending.json()) == (202, {"status": "pending"})
    assert AuditEntry.objects.count() == entries  # a waiting poll is not logged
    assert sim.oauth()["sign_ins"] == 0

    enter(started)
    done = poll(admin_client_api, started["flow"])

    assert done.status_code == 201, done.json()
    body = done.json()
    assert body["name"] == "gpt-device" and body["provider"] == "openai-codex"
    plan = Subscription.objects.get(name="gpt-device")
    assert plan.token is not None
    stored = json.loads(plan.token.reveal())
    assert stored["account_id"] == sim.credential("chatgpt-sign-in-1")["account_id"]
    assert stored["refresh_token"].startswith("rt_sim_")
    assert stored["refresh_token"] not in json.dumps(body)
    assert AuditEntry.objects.filter(action="subscription.sign_in").count() == 1
    # Finished: the flow is gone.
    assert poll(admin_client_api, started["flow"]).status_code == 404


@pytest.mark.django_db
def test_only_an_admin_signs_in_with_a_device_code_and_only_the_one_who_started(
    sim: SimulatorControl, admin_client_api: APIClient, owner_client: APIClient
) -> None:
    assert start(owner_client).status_code == 403
    started = start(admin_client_api).json()
    enter(started)
    assert poll(owner_client, started["flow"]).status_code == 403
    other_admin = _client_for(UserFactory.create(username="admin2", is_staff=True))
    assert poll(other_admin, started["flow"]).status_code == 404
    assert not Subscription.objects.exists()
    assert poll(admin_client_api, started["flow"]).status_code == 201


@pytest.mark.django_db
def test_an_expired_device_code_is_a_410_and_nothing_stored(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    started = start(admin_client_api).json()
    enter(started)
    later = datetime.now(UTC) + timedelta(minutes=15, seconds=1)
    with time_machine.travel(later, tick=False):
        ended = poll(admin_client_api, started["flow"])
    assert (ended.status_code, ended.json()["code"]) == (410, "sign_in_ended")
    assert "expired" in ended.json()["detail"]
    assert not Subscription.objects.exists()
    assert poll(admin_client_api, started["flow"]).status_code == 404


@pytest.mark.django_db
def test_a_sign_in_cancelled_at_the_provider_is_a_410_and_nothing_stored(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    started = start(admin_client_api).json()
    enter(started, "deny")
    ended = poll(admin_client_api, started["flow"])
    assert (ended.status_code, ended.json()["code"]) == (410, "sign_in_ended")
    assert "access_denied" in ended.json()["detail"]
    assert not Subscription.objects.exists()
    assert poll(admin_client_api, started["flow"]).status_code == 404


@pytest.mark.django_db
def test_a_provider_that_does_not_answer_is_a_502_and_the_flow_stays(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    with override_settings(TRINITY_CODEX_AUTH_URL=DOWN):
        down = start(admin_client_api)
    assert (down.status_code, down.json()["code"]) == (502, "provider_unavailable")
    started = start(admin_client_api).json()
    enter(started)
    with override_settings(TRINITY_CODEX_AUTH_URL=DOWN):
        down = poll(admin_client_api, started["flow"])
    assert (down.status_code, down.json()["code"]) == (502, "provider_unavailable")
    assert not Subscription.objects.exists()
    assert poll(admin_client_api, started["flow"]).status_code == 201


@pytest.mark.django_db
def test_an_unknown_plan_type_or_flow_is_refused_before_the_provider_is_asked(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    unknown = start(admin_client_api, plan_type="max-5x")  # a Claude plan type
    assert unknown.status_code == 400 and "plan_type" in unknown.json()
    assert sim.oauth()["device_auths"] == 0
    assert poll(admin_client_api, "no-such-flow").status_code == 404
    # A pasted flow is not a device flow.
    pasted = admin_client_api.post(
        "/api/subscriptions/sign-in",
        {"provider": "chatgpt", "name": "p", "plan_type": "pro"},
        format="json",
    ).json()
    assert poll(admin_client_api, pasted["flow"]).status_code == 404


@pytest.mark.parametrize(
    ("sent", "seconds"),
    [("5", 5), (5, 5), (" 7 ", 7), ("0", 1), (1, 1), (60, 60), ("61", 60), ("soon", 5), (None, 5)],
)
def test_the_providers_poll_interval_reads_as_whole_seconds_within_a_minute(
    sent: object, seconds: int
) -> None:
    assert poll_interval(sent) == seconds
