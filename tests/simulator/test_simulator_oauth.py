"""The simulator's sign-in: the authorize page, both token endpoints, PKCE, single-use
codes and refresh tokens, and the tokens it mints serving requests."""

from __future__ import annotations

import re
import secrets
import urllib.parse
from datetime import datetime
from typing import Any

import httpx
import pytest

from simulator.anthropic import OAUTH_EXPIRED
from simulator.control import SimulatorControl
from simulator.oauth import CLAUDE_CLIENT_ID, CODEX_CLIENT_ID, challenge_of
from tests.simulator.conftest import PostMessage
from tests.simulator.test_simulator_codex import claims

CLAUDE_REDIRECT = "https://console.anthropic.com/oauth/code/callback"
CODEX_REDIRECT = "http://localhost:1455/auth/callback"


def authorize(
    api: httpx.Client, client_id: str, redirect: str, verifier: str, state: str, **extra: str
) -> httpx.Response:
    params = {
        "code": "true",
        "client_id": client_id,
        "response_type": "code",
        "redirect_uri": redirect,
        "code_challenge": challenge_of(verifier),
        "code_challenge_method": "S256",
        "state": state,
        **extra,
    }
    return api.get("/oauth/authorize", params=params)


def shown(page: httpx.Response) -> str:
    found = re.search(r"<code id='code'>([^<]+)</code>", page.text)
    assert found, page.text
    return found.group(1).replace("&amp;", "&")


def claude_code(api: httpx.Client, verifier: str, state: str = "st-1") -> str:
    code, _, echoed = shown(
        authorize(api, CLAUDE_CLIENT_ID, CLAUDE_REDIRECT, verifier, state)
    ).partition("#")
    assert echoed == state
    return code


def claude_exchange(api: httpx.Client, code: str, verifier: str, **over: Any) -> httpx.Response:
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "state": "st-1",
        "client_id": CLAUDE_CLIENT_ID,
        "redirect_uri": CLAUDE_REDIRECT,
        "code_verifier": verifier,
        **over,
    }
    return api.post("/v1/oauth/token", json=body)


def claude_refresh(api: httpx.Client, token: str) -> httpx.Response:
    body = {"grant_type": "refresh_token", "refresh_token": token, "client_id": CLAUDE_CLIENT_ID}
    return api.post("/v1/oauth/token", json=body)


def test_a_claude_sign_in_mints_a_plan_token_that_serves_and_expires(
    api: httpx.Client, control: SimulatorControl, post_message: PostMessage, frozen: datetime
) -> None:
    verifier = secrets.token_urlsafe(32)
    answer = claude_exchange(api, claude_code(api, verifier), verifier)
    assert answer.status_code == 200, answer.text
    tokens = answer.json()
    assert tokens["access_token"].startswith("sk-ant-oat01-")
    assert tokens["refresh_token"].startswith("sk-ant-ort01-")
    assert tokens["expires_in"] == 8 * 3600
    assert post_message(token=tokens["access_token"]).status_code == 200
    view = control.credential("claude-sign-in-1")
    assert view["kind"] == "oauth" and view["windows"]["five_hour"]["used"] > 0
    control.advance_clock(8 * 3600)
    expired = post_message(token=tokens["access_token"])
    assert (expired.status_code, expired.json()["error"]["message"]) == (401, OAUTH_EXPIRED)


def test_a_claude_refresh_rotates_once_and_counts(
    api: httpx.Client, control: SimulatorControl, post_message: PostMessage
) -> None:
    verifier = secrets.token_urlsafe(32)
    first = claude_exchange(api, claude_code(api, verifier), verifier).json()
    rotated = claude_refresh(api, first["refresh_token"])
    assert rotated.status_code == 200
    new = rotated.json()
    assert new["access_token"] != first["access_token"]
    assert new["refresh_token"] != first["refresh_token"]
    # The rotated token spends the same plan.
    assert post_message(token=new["access_token"]).status_code == 200
    assert control.credential("claude-sign-in-1")["refreshes"] == 1
    assert control.oauth()["refreshes"] == 1
    reused = claude_refresh(api, first["refresh_token"])
    assert (reused.status_code, reused.json()["error"]) == (400, "invalid_grant")


def test_a_revoked_refresh_token_is_refused(api: httpx.Client, control: SimulatorControl) -> None:
    verifier = secrets.token_urlsafe(32)
    first = claude_exchange(api, claude_code(api, verifier), verifier).json()
    control.revoke_refresh(first["refresh_token"])
    refused = claude_refresh(api, first["refresh_token"])
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
    assert control.oauth()["refreshes"] == 0


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"code_verifier": "not-the-verifier"}, "code_verifier"),
        ({"state": "other"}, "state"),
        ({"redirect_uri": "https://elsewhere.invalid/cb"}, "redirect_uri"),
    ],
)
def test_a_claude_code_is_refused_with_a_wrong_part_and_spent(
    api: httpx.Client, over: dict[str, str], why: str
) -> None:
    verifier = secrets.token_urlsafe(32)
    code = claude_code(api, verifier)
    refused = claude_exchange(api, code, verifier, **over)
    assert refused.status_code == 400 and why in refused.json()["error_description"]
    # Spent by the failed attempt: the right verifier no longer redeems it.
    assert claude_exchange(api, code, verifier).status_code == 400


def test_a_code_is_single_use_and_short_lived(api: httpx.Client, control: SimulatorControl) -> None:
    verifier = secrets.token_urlsafe(32)
    code = claude_code(api, verifier)
    assert claude_exchange(api, code, verifier).status_code == 200
    assert claude_exchange(api, code, verifier).status_code == 400
    late = claude_code(api, verifier)
    control.advance_clock(601)
    answer = claude_exchange(api, late, verifier)
    assert "expired" in answer.json()["error_description"]


def test_the_authorize_page_refuses_a_request_without_pkce(api: httpx.Client) -> None:
    page = authorize(
        api, CLAUDE_CLIENT_ID, CLAUDE_REDIRECT, "v", "s", code_challenge_method="plain"
    )
    assert page.status_code == 400 and "S256" in page.text


def test_a_chatgpt_sign_in_shows_the_callback_and_mints_a_plan(
    api: httpx.Client, control: SimulatorControl
) -> None:
    verifier = secrets.token_urlsafe(32)
    callback = shown(authorize(api, CODEX_CLIENT_ID, CODEX_REDIRECT, verifier, "st-2"))
    assert callback.startswith(CODEX_REDIRECT + "?")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))
    assert query["state"] == "st-2"
    form = {
        "grant_type": "authorization_code",
        "code": query["code"],
        "redirect_uri": CODEX_REDIRECT,
        "client_id": CODEX_CLIENT_ID,
        "code_verifier": verifier,
    }
    answer = api.post("/oauth/token", data=form)
    assert answer.status_code == 200, answer.text
    tokens = answer.json()
    account = claims(tokens["id_token"])["https://api.openai.com/auth"]["chatgpt_account_id"]
    view = control.credential("chatgpt-sign-in-1")
    assert view["kind"] == "codex" and view["account_id"] == account
    usage = api.get(
        "/backend-api/wham/usage", headers={"authorization": f"Bearer {tokens['access_token']}"}
    )
    assert usage.status_code == 200
    assert api.post("/oauth/token", data=form).status_code == 400
