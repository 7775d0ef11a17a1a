"""ChatGPT's device-code sign-in, as the Codex CLI's ``codex login --device-auth`` uses
it: the client asks for a user code, the person types it on the device page and
signs in there, and the client, polling, gets an authorization code with its PKCE
verifier, which it redeems at ``POST /oauth/token`` (``simulator/oauth.py``) with the
redirect URI ``{auth}/deviceauth/callback``.

- ``POST /api/accounts/deviceauth/usercode`` ``{client_id}`` → ``{device_auth_id,
  user_code, interval}`` (the interval a string, as the provider sends it).
- ``GET /codex/device``: a form for the user code, "Continue" approves it, "Cancel"
  denies it; ``POST /codex/device`` takes the form.
- ``POST /api/accounts/deviceauth/token`` ``{device_auth_id, user_code}`` → 404 while
  the person has not approved (and for an unknown or expired device auth: the
  provider's record is gone), 400 ``access_denied`` once denied, then 200
  ``{authorization_code, code_verifier, code_challenge}``.

A device auth lives ``DEVICE_LIFETIME_S``; its authorization code is the authorize
page's kind (single use, ``CODE_LIFETIME_S``).
"""

from __future__ import annotations

import html
import json
import secrets
import urllib.parse
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from simulator.answering import Answering
from simulator.oauth import CODE_LIFETIME_S, CODEX_CLIENT_ID, challenge_of
from simulator.state import AuthCode, DeviceAuth, Simulator

DEVICE_LIFETIME_S = 15 * 60
POLL_INTERVAL_S = "5"
# No letters a person confuses when typing (0/O, 1/I).
_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def add_device_auth_routes(app: FastAPI, answering: Answering) -> None:
    """Mount the device-code endpoints and the device page on ``app``."""
    sim = answering.sim

    @app.post("/api/accounts/deviceauth/usercode")
    async def usercode(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return await answering.answered(
            request, lambda raw, outcome: serve_usercode(sim, raw, base=base)
        )

    @app.post("/api/accounts/deviceauth/token")
    async def device_token(request: Request) -> Response:
        return await answering.answered(request, lambda raw, outcome: serve_device_token(sim, raw))

    @app.get("/codex/device")
    async def device_page(request: Request) -> Response:
        return await answering.answered(request, lambda raw, outcome: _device_form())

    @app.post("/codex/device")
    async def device_decide(request: Request) -> Response:
        return await answering.answered(request, lambda raw, outcome: serve_decision(sim, raw))


def _json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _error(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def serve_usercode(sim: Simulator, raw: bytes, *, base: str) -> Response:
    """A new device auth for the Codex client; its redirect URI is this server's."""
    if _json_body(raw).get("client_id") != CODEX_CLIENT_ID:
        return _error("invalid_client", "Unknown client_id.", 400)
    device_auth_id = "deviceauth_" + secrets.token_urlsafe(18)
    letters = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(8))
    user_code = f"{letters[:4]}-{letters[4:]}"
    sim.device_auths[device_auth_id] = DeviceAuth(
        user_code=user_code,
        redirect_uri=base + "/deviceauth/callback",
        expires_at=sim.clock.now() + DEVICE_LIFETIME_S,
    )
    return JSONResponse(
        {"device_auth_id": device_auth_id, "user_code": user_code, "interval": POLL_INTERVAL_S}
    )


def serve_device_token(sim: Simulator, raw: bytes) -> Response:
    """The poll: pending (404), denied (400), or the code and verifier to redeem."""
    body = _json_body(raw)
    found = sim.device_auths.get(str(body.get("device_auth_id", "")))
    if (
        found is None
        or found.user_code != body.get("user_code")
        or sim.clock.now() >= found.expires_at
    ):
        return _error("deviceauth_not_found", "Unknown or expired device authorization.", 404)
    if found.denied:
        return _error("access_denied", "The user denied the device authorization.", 400)
    if found.code is None or found.verifier is None:
        return _error("deviceauth_pending", "Authorization pending.", 404)
    return JSONResponse(
        {
            "authorization_code": found.code,
            "code_verifier": found.verifier,
            "code_challenge": challenge_of(found.verifier),
        }
    )


# the device page


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(text, status_code=status)


def _device_form(problem: str = "", status: int = 200) -> HTMLResponse:
    error = f"<p id='error' role='alert'>{html.escape(problem)}</p>" if problem else ""
    form = (
        f"{error}<form method='post' action='/codex/device'>"
        "<label for='user_code'>Enter the code shown in the application</label> "
        "<input id='user_code' name='user_code' autocomplete='off' autofocus> "
        "<button type='submit' name='decision' value='approve'>Continue</button> "
        "<button type='submit' name='decision' value='deny'>Cancel</button></form>"
    )
    return _page("Sign in with ChatGPT on a device (simulator)", form, status)


def _waiting(sim: Simulator, user_code: str) -> DeviceAuth | None:
    wanted = user_code.strip().upper().replace(" ", "")
    if len(wanted) == 8 and "-" not in wanted:
        wanted = f"{wanted[:4]}-{wanted[4:]}"
    now = sim.clock.now()
    for found in sim.device_auths.values():
        decided = found.code is not None or found.denied
        if found.user_code == wanted and not decided and now < found.expires_at:
            return found
    return None


def serve_decision(sim: Simulator, raw: bytes) -> Response:
    """The person's answer on the device page: approving signs them in (an
    authorization code and verifier tied to the device auth), cancelling denies it."""
    form = dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace")))
    found = _waiting(sim, form.get("user_code", ""))
    if found is None:
        return _device_form("That code is unknown, expired or already used.", 400)
    if form.get("decision") == "deny":
        found.denied = True
        return _page("Sign-in cancelled", "<p id='done'>You can close this tab.</p>")
    found.verifier = secrets.token_urlsafe(48)
    found.code = secrets.token_urlsafe(24)
    sim.auth_codes[found.code] = AuthCode(
        client_id=CODEX_CLIENT_ID,
        redirect_uri=found.redirect_uri,
        challenge=challenge_of(found.verifier),
        state="",
        expires_at=sim.clock.now() + CODE_LIFETIME_S,
    )
    return _page("Signed in", "<p id='done'>Signed in. Return to the application.</p>")
