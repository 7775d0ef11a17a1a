"""Signing a plan in from the panel: the REST flow against the real simulator's authorize
page and token endpoints (the browser's part is tests/browser/test_plan_sign_in.py)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import Subscription
from subscriptions.plan_sign_in.flow import pasted_code
from tests.agents.factories import UserFactory
from tests.conftest import _client_for

START = "/api/subscriptions/sign-in"


def start(client: APIClient, provider: str = "claude", **over: str) -> Any:
    body = {"provider": provider, "name": "max-signed-in", "plan_type": "max-5x", **over}
    if provider == "chatgpt" and "plan_type" not in over:
        body["plan_type"] = "pro"
    return client.post(START, body, format="json")


def shown_code(authorize_url: str) -> str:
    """What the admin copies from the provider's page (the browser test clicks it)."""
    page = httpx.get(authorize_url, timeout=10)
    assert page.status_code == 200, page.text
    found = re.search(r"<code id='code'>([^<]+)</code>", page.text)
    assert found
    return found.group(1).replace("&amp;", "&")


def paste(client: APIClient, flow: str, code: str) -> Any:
    return client.post(f"{START}/{flow}/code", {"pasted": code}, format="json")


@pytest.mark.django_db
def test_signing_in_with_claude_registers_the_plan_with_its_tokens_encrypted(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    started = start(admin_client_api)
    assert started.status_code == 201, started.json()
    flow = started.json()
    assert set(flow) == {"flow", "provider", "authorize_url", "expires_at"}
    assert "code_challenge_method=S256" in flow["authorize_url"]
    pasted = shown_code(flow["authorize_url"])
    assert "#" in pasted  # Claude's page shows code#state

    answer = paste(admin_client_api, flow["flow"], pasted)

    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["name"] == "max-signed-in" and body["provider"] == "anthropic"
    assert "token" not in body and "refresh_token" not in json.dumps(body)
    plan = Subscription.objects.get(name="max-signed-in")
    assert plan.token is not None and plan.refresh_token is not None
    access, refresh = plan.token.reveal(), plan.refresh_token.reveal()
    assert access.startswith("sk-ant-oat01-") and refresh.startswith("sk-ant-ort01-")
    assert body["token_fingerprint"] == access[-4:]
    assert plan.token_expires_at is not None
    expected = datetime.now(UTC) + timedelta(hours=8)
    assert abs((plan.token_expires_at - expected).total_seconds()) < 60
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT token, refresh_token FROM subscriptions_subscription WHERE id = %s", [plan.pk]
        )
        stored = " ".join(cursor.fetchone())
    assert access not in stored and refresh not in stored
    assert sim.credential("claude-sign-in-1")["kind"] == "oauth"
    # The flow is finished: the same paste again finds nothing.
    assert paste(admin_client_api, flow["flow"], pasted).status_code == 404


@pytest.mark.django_db
def test_signing_in_with_chatgpt_registers_a_codex_plan_for_its_account(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    flow = start(admin_client_api, "chatgpt", name="gpt-signed-in").json()
    assert "codex_cli_simplified_flow=true" in flow["authorize_url"]
    callback = shown_code(flow["authorize_url"])
    assert callback.startswith("http://localhost:1455/auth/callback?")

    answer = paste(admin_client_api, flow["flow"], callback)

    assert answer.status_code == 201, answer.json()
    plan = Subscription.objects.get(name="gpt-signed-in")
    assert plan.provider == "openai-codex" and plan.token is not None
    stored = json.loads(plan.token.reveal())
    assert stored["account_id"] == sim.credential("chatgpt-sign-in-1")["account_id"]
    assert stored["refresh_token"].startswith("rt_sim_")


@pytest.mark.django_db
def test_only_an_admin_signs_a_plan_in_and_only_the_one_who_started(
    sim: SimulatorControl, admin_client_api: APIClient, owner_client: APIClient
) -> None:
    assert start(owner_client).status_code == 403
    flow = start(admin_client_api).json()
    pasted = shown_code(flow["authorize_url"])
    assert paste(owner_client, flow["flow"], pasted).status_code == 403
    other_admin = _client_for(UserFactory.create(username="admin2", is_staff=True))
    assert paste(other_admin, flow["flow"], pasted).status_code == 404
    assert not Subscription.objects.exists()
    # The flow is still its starter's.
    assert paste(admin_client_api, flow["flow"], pasted).status_code == 201


@pytest.mark.django_db
def test_a_code_of_another_sign_in_is_refused_and_nothing_stored(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    first = start(admin_client_api).json()
    second = start(admin_client_api, name="another").json()
    foreign = shown_code(second["authorize_url"])

    refused = paste(admin_client_api, first["flow"], foreign)

    assert refused.status_code == 400
    assert "state does not match" in refused.json()["pasted"][0]
    assert not Subscription.objects.exists()
    assert sim.oauth()["codes_redeemed"] == 0  # refused before the provider was asked
    # The flow stays open for its own code.
    own = shown_code(first["authorize_url"])
    assert paste(admin_client_api, first["flow"], own).status_code == 201


@pytest.mark.django_db
def test_a_code_the_provider_refuses_is_a_400_and_nothing_stored(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    flow = start(admin_client_api).json()
    code, _, state = shown_code(flow["authorize_url"]).partition("#")

    refused = paste(admin_client_api, flow["flow"], f"not-{code}#{state}")

    assert refused.status_code == 400
    assert "refused the code" in refused.json()["pasted"][0]
    assert not Subscription.objects.exists()


@pytest.mark.django_db
def test_an_expired_code_is_refused(sim: SimulatorControl, admin_client_api: APIClient) -> None:
    flow = start(admin_client_api).json()
    pasted = shown_code(flow["authorize_url"])
    sim.advance_clock(601)
    assert paste(admin_client_api, flow["flow"], pasted).status_code == 400
    assert not Subscription.objects.exists()


@pytest.mark.django_db
def test_a_provider_that_does_not_answer_is_a_502_and_nothing_stored(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    flow = start(admin_client_api).json()
    pasted = shown_code(flow["authorize_url"])
    with override_settings(TRINITY_CLAUDE_OAUTH_TOKEN_URL="http://127.0.0.1:9/v1/oauth/token"):
        down = paste(admin_client_api, flow["flow"], pasted)
    assert down.status_code == 502
    assert down.json()["code"] == "provider_unavailable"
    assert not Subscription.objects.exists()


@pytest.mark.django_db
def test_a_code_without_its_state_is_refused_before_the_provider_is_asked(
    sim: SimulatorControl, admin_client_api: APIClient
) -> None:
    flow = start(admin_client_api).json()
    code, _, _ = shown_code(flow["authorize_url"]).partition("#")
    refused = paste(admin_client_api, flow["flow"], code)
    assert refused.status_code == 400 and "code#state" in refused.json()["pasted"][0]
    assert sim.oauth()["codes_redeemed"] == 0
    assert not Subscription.objects.exists()


@pytest.mark.django_db
def test_an_unknown_flow_and_an_unknown_plan_type_are_refused(
    sim: SimulatorControl, admin_client_api: APIClient, admin_user: User
) -> None:
    assert paste(admin_client_api, "no-such-flow", "abc#def").status_code == 404
    unknown = start(admin_client_api, plan_type="platinum")
    assert unknown.status_code == 400 and "plan_type" in unknown.json()
    assert start(admin_client_api, provider="gemini").status_code == 400


@pytest.mark.parametrize(
    ("pasted", "expected"),
    [
        ("abc#xyz", ("abc", "xyz")),
        ("  abc#xyz \n", ("abc", "xyz")),
        ("abc", ("abc", "")),
        ("http://localhost:1455/auth/callback?code=abc&state=xyz", ("abc", "xyz")),
        ("code=abc&state=xyz", ("abc", "xyz")),
        ("http://localhost:1455/auth/callback?state=xyz", ("", "xyz")),
        ("", ("", "")),
    ],
)
def test_what_an_admin_pastes_reads_as_a_code_and_a_state(
    pasted: str, expected: tuple[str, str]
) -> None:
    assert pasted_code(pasted) == expected
