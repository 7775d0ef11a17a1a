"""The simulator's device-code sign-in (ChatGPT's, ``codex login --device-auth``): a
user code, the device page that approves or cancels it, the poll, and the code it
gives redeemed once at /oauth/token with the device redirect URI."""

from __future__ import annotations

from typing import Any

import httpx

from simulator.control import SimulatorControl
from simulator.oauth import CODEX_CLIENT_ID, challenge_of
from tests.simulator.test_simulator_codex import claims


def usercode(api: httpx.Client) -> dict[str, Any]:
    answer = api.post("/api/accounts/deviceauth/usercode", json={"client_id": CODEX_CLIENT_ID})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def poll(api: httpx.Client, device: dict[str, Any]) -> httpx.Response:
    body = {"device_auth_id": device["device_auth_id"], "user_code": device["user_code"]}
    return api.post("/api/accounts/deviceauth/token", json=body)


def decide(api: httpx.Client, user_code: str, decision: str = "approve") -> httpx.Response:
    return api.post("/codex/device", data={"user_code": user_code, "decision": decision})


def redeem(api: httpx.Client, code: str, verifier: str, redirect: str) -> httpx.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect,
        "client_id": CODEX_CLIENT_ID,
        "code_verifier": verifier,
    }
    return api.post("/oauth/token", data=form)


def test_an_approved_device_code_gives_a_code_that_redeems_once_for_a_plan(
    api: httpx.Client, control: SimulatorControl
) -> None:
    device = usercode(api)
    assert device["interval"] == "5"  # a string, as the provider sends it
    assert poll(api, device).status_code == 404  # pending
    page = api.get("/codex/device")
    assert page.status_code == 200 and "name='user_code'" in page.text
    # Typed as a person might: lower case, without the dash.
    approved = decide(api, device["user_code"].lower().replace("-", ""))
    assert approved.status_code == 200 and "Signed in" in approved.text
    assert control.oauth()["device_auths_approved"] == 1

    answer = poll(api, device)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["code_challenge"] == challenge_of(got["code_verifier"])
    redirect = str(api.base_url).rstrip("/") + "/deviceauth/callback"
    # The device code is redeemed with the device redirect URI only.
    assert redeem(api, got["authorization_code"], got["code_verifier"], "http://x/cb").is_error
    device = usercode(api)
    decide(api, device["user_code"])
    got = poll(api, device).json()
    tokens = redeem(api, got["authorization_code"], got["code_verifier"], redirect)
    assert tokens.status_code == 200, tokens.text
    account = claims(tokens.json()["id_token"])["https://api.openai.com/auth"]
    assert control.credential("chatgpt-sign-in-1")["account_id"] == account["chatgpt_account_id"]
    again = redeem(api, got["authorization_code"], got["code_verifier"], redirect)
    assert again.status_code == 400


def test_a_cancelled_device_code_is_refused_and_cannot_be_approved(api: httpx.Client) -> None:
    device = usercode(api)
    assert decide(api, device["user_code"], "deny").status_code == 200
    denied = poll(api, device)
    assert (denied.status_code, denied.json()["error"]["code"]) == (400, "access_denied")
    assert decide(api, device["user_code"]).status_code == 400


def test_a_device_code_expires_after_fifteen_minutes(
    api: httpx.Client, control: SimulatorControl
) -> None:
    device = usercode(api)
    control.advance_clock(15 * 60)
    refused = decide(api, device["user_code"])
    assert refused.status_code == 400 and "id='error'" in refused.text
    assert poll(api, device).status_code == 404


def test_an_unknown_client_or_user_code_is_refused(api: httpx.Client) -> None:
    other = api.post("/api/accounts/deviceauth/usercode", json={"client_id": "app_other"})
    assert other.status_code == 400
    device = usercode(api)
    assert poll(api, {**device, "user_code": "ZZZZ-ZZZZ"}).status_code == 404
    assert decide(api, "ZZZZ-ZZZZ").status_code == 400
