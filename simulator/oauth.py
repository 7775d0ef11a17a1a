"""The providers' sign-in: the authorize page and the token endpoints, as the Claude
Code CLI and the Codex CLI use them to sign a plan in (authorization code with PKCE).

- ``GET /oauth/authorize``: both providers' page (told apart by ``client_id``, as a
  provider's page is by its client). It checks the request (a known client,
  ``response_type=code``, an S256 challenge, a state) and shows what the user copies:
  for Claude ``code#state``, as Claude Code's manual flow shows on its callback page;
  for ChatGPT the callback address with ``code`` and ``state``, as the browser would
  land on it. The page signs in a new plan account each time.
- ``POST /v1/oauth/token`` (Claude, JSON body) and ``POST /oauth/token`` (ChatGPT,
  JSON or form): ``grant_type=authorization_code`` redeems a code once, within
  ``CODE_LIFETIME_S``, with the verifier whose S256 is the challenge, the same
  client, redirect URI (and for Claude the state); ``grant_type=refresh_token``
  rotates a refresh token (single use: ``Simulator.rotate``).

The access tokens it mints serve turns: a Claude one (``sk-ant-oat01-…``) on the
Messages API as the plan's OAuth credential, a ChatGPT one on the ChatGPT backend;
each expires after its lifetime, and the control API counts refreshes and revokes a
refresh token (``add_oauth_control``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import secrets
import urllib.parse
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from simulator import codex
from simulator.answering import Answering, Outcome
from simulator.state import AuthCode, Credential, RefreshRefused, SignIn, Simulator

CLAUDE_CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
CODE_LIFETIME_S = 600
# Claude Code's access tokens live 8 hours; a ChatGPT sign-in's about 10 days.
CLAUDE_ACCESS_LIFETIME_S = 8 * 3600
CHATGPT_ACCESS_LIFETIME_S = 10 * 86400
CLAUDE_SCOPE = "org:create_api_key user:profile user:inference"


@dataclass(frozen=True)
class Client:
    provider: str  # "claude" | "chatgpt"
    title: str


CLIENTS = {
    CLAUDE_CLIENT_ID: Client("claude", "Claude"),
    CODEX_CLIENT_ID: Client("chatgpt", "ChatGPT"),
}


def add_oauth_routes(app: FastAPI, answering: Answering) -> None:
    """Mount the authorize page and both providers' token endpoints on ``app``."""
    sim = answering.sim

    @app.get("/oauth/authorize")
    async def authorize(request: Request) -> Response:
        params = dict(request.query_params)
        return await answering.answered(request, lambda raw, outcome: serve_authorize(sim, params))

    @app.post("/v1/oauth/token")
    async def claude_token(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_claude_token(sim, raw, outcome)
        )

    @app.post("/oauth/token")
    async def chatgpt_token(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_chatgpt_token(sim, raw, outcome)
        )


# the authorize page


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(text, status_code=status)


def serve_authorize(sim: Simulator, params: dict[str, str]) -> Response:
    """``GET /oauth/authorize``: a code for the request, shown to copy; or a 400 page
    naming what is wrong with the request."""
    client = CLIENTS.get(params.get("client_id", ""))
    problem = None
    if client is None:
        problem = "Unknown client_id."
    elif params.get("response_type") != "code":
        problem = "response_type must be code."
    elif params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
        problem = "A PKCE code_challenge with code_challenge_method=S256 is required."
    elif not params.get("state") or not params.get("redirect_uri"):
        problem = "state and redirect_uri are required."
    if problem is not None or client is None:
        return _page("Sign-in refused", f"<p id='error'>{html.escape(problem or '')}</p>", 400)
    code = secrets.token_urlsafe(24)
    state = params["state"]
    sim.auth_codes[code] = AuthCode(
        client_id=params["client_id"],
        redirect_uri=params["redirect_uri"],
        challenge=params["code_challenge"],
        state=state,
        expires_at=sim.clock.now() + CODE_LIFETIME_S,
    )
    if client.provider == "claude":
        shown, say = f"{code}#{state}", "Copy this code and paste it into the application:"
    else:
        query = urllib.parse.urlencode({"code": code, "state": state})
        shown = f"{params['redirect_uri']}?{query}"
        say = "Signed in. Copy this callback address and paste it into the application:"
    body = f"<p>{html.escape(say)}</p><code id='code'>{html.escape(shown)}</code>"
    return _page(f"Sign in with {client.title} (simulator)", body)


# redeeming a code


def challenge_of(verifier: str) -> str:
    """The S256 code challenge of ``verifier`` (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def redeem(sim: Simulator, body: dict[str, Any], *, state_required: bool) -> str | None:
    """Spend the code ``body`` presents; None when it redeems, else why not. A code is
    spent by any attempt, as a provider's is."""
    code = body.get("code")
    found = sim.auth_codes.get(code) if isinstance(code, str) else None
    if found is None or found.used:
        return "Invalid or already used authorization code."
    found.used = True
    verifier = body.get("code_verifier")
    if sim.clock.now() >= found.expires_at:
        return "The authorization code has expired."
    if body.get("client_id") != found.client_id or body.get("redirect_uri") != found.redirect_uri:
        return "client_id or redirect_uri does not match the authorization request."
    if not isinstance(verifier, str) or challenge_of(verifier) != found.challenge:
        return "code_verifier does not match the code_challenge."
    if state_required and body.get("state") != found.state:
        return "state does not match the authorization request."
    return None


def _oauth_error(code: str, description: str, status: int = 400) -> JSONResponse:
    """The RFC 6749 error shape (Anthropic's token endpoint answers it)."""
    return JSONResponse({"error": code, "error_description": description}, status_code=status)


def _new_sign_in(sim: Simulator, provider: str) -> str:
    sim.sign_ins += 1
    return f"{provider}-sign-in-{sim.sign_ins}"


# Claude: /v1/oauth/token


def _claude_access() -> str:
    return "sk-ant-oat01-" + secrets.token_urlsafe(60) + "AA"


def _claude_refresh() -> str:
    return "sk-ant-ort01-" + secrets.token_urlsafe(60) + "AA"


def _claude_answer(cred: Credential, access: str, refresh: str) -> JSONResponse:
    return JSONResponse(
        {
            "token_type": "Bearer",
            "access_token": access,
            "expires_in": cred.access_lifetime or CLAUDE_ACCESS_LIFETIME_S,
            "refresh_token": refresh,
            "scope": CLAUDE_SCOPE,
            "account": {"uuid": cred.user_id, "email_address": cred.email},
            "organization": {"uuid": cred.account_id, "name": cred.label},
        }
    )


def serve_claude_token(sim: Simulator, raw: bytes, outcome: Outcome) -> Response:
    """``POST /v1/oauth/token``: a code redeemed for a new Claude plan's tokens, or a
    refresh token rotated. Refusals are 400 ``invalid_grant``."""
    body = codex.refresh_request(raw)
    grant = body.get("grant_type")
    if body.get("client_id") != CLAUDE_CLIENT_ID:
        return _oauth_error("invalid_client", "Unknown client_id.", 401)
    if grant == "authorization_code":
        problem = redeem(sim, body, state_required=True)
        if problem is not None:
            return _oauth_error("invalid_grant", problem)
        access, refresh = _claude_access(), _claude_refresh()
        label = _new_sign_in(sim, "claude")
        email = f"{label}@example.invalid"
        sign_in = SignIn(refresh_token=refresh, expires_in=CLAUDE_ACCESS_LIFETIME_S, email=email)
        cred = sim.register(
            token=access, kind="oauth", label=label, plan_type="max", sign_in=sign_in
        )
        outcome.credential = cred
        return _claude_answer(cred, access, refresh)
    if grant != "refresh_token":
        return _oauth_error("unsupported_grant_type", "Unsupported grant type.")
    presented = body.get("refresh_token")
    if not isinstance(presented, str) or not presented:
        return _oauth_error("invalid_request", "refresh_token is required.")
    new_refresh = _claude_refresh()
    try:
        cred, access = sim.rotate(
            presented,
            mint_access=lambda cred, expires_at: _claude_access(),
            new_refresh=new_refresh,
        )
    except RefreshRefused as refused:
        outcome.credential = refused.credential
        return _oauth_error("invalid_grant", codex.REFRESH_REFUSALS[refused.code])
    outcome.credential = cred
    return _claude_answer(cred, access, new_refresh)


# ChatGPT: /oauth/token


def serve_chatgpt_token(sim: Simulator, raw: bytes, outcome: Outcome) -> Response:
    """``POST /oauth/token``: a code redeemed for a new ChatGPT plan's tokens (an id
    token naming its account, an access token, a refresh token); a refresh is
    ``codex.serve_refresh``'s."""
    body = codex.refresh_request(raw)
    if body.get("grant_type") != "authorization_code":
        return codex.serve_refresh(sim, raw, outcome)
    problem = redeem(sim, body, state_required=False)
    if problem is not None:
        error = {"code": "invalid_grant", "message": problem}
        return JSONResponse({"error": error}, status_code=400)
    label = _new_sign_in(sim, "chatgpt")
    suffix = secrets.token_hex(4)
    sign_in = SignIn(
        account_id=f"acct-sim-{suffix}",
        user_id=f"user-sim-{suffix}",
        email=f"{label}@example.invalid",
        refresh_token="rt_sim_" + secrets.token_urlsafe(24),
        expires_in=CHATGPT_ACCESS_LIFETIME_S,
    )
    claims = codex.chatgpt_claims(
        sim,
        plan_type="pro",
        account_id=sign_in.account_id,
        user_id=sign_in.user_id,
        email=sign_in.email,
        expires_at=sim.clock.now() + CHATGPT_ACCESS_LIFETIME_S,
    )
    access = codex.unsigned_jwt(claims)
    cred = sim.register(token=access, kind="codex", label=label, plan_type="pro", sign_in=sign_in)
    outcome.credential = cred
    return JSONResponse(
        {
            "id_token": codex.unsigned_jwt(claims),
            "access_token": access,
            "refresh_token": sign_in.refresh_token,
            "token_type": "Bearer",
            "expires_in": CHATGPT_ACCESS_LIFETIME_S,
            "scope": "openid profile email offline_access",
        }
    )


# control calls


class RefreshTokenIn(BaseModel):
    refresh_token: str


def add_oauth_control(control: APIRouter, sim: Simulator) -> None:
    """Mount the sign-in's control calls: its counts, and revoking a refresh token."""

    @control.get("/oauth")
    async def oauth_view() -> dict[str, int]:
        return {
            "sign_ins": sim.sign_ins,
            "codes_issued": len(sim.auth_codes),
            "codes_redeemed": sum(code.used for code in sim.auth_codes.values()),
            "refreshes": sum(cred.refreshes for cred in sim.credentials.values()),
            "device_auths": len(sim.device_auths),
            "device_auths_approved": sum(d.code is not None for d in sim.device_auths.values()),
        }

    @control.post("/oauth/revoke-refresh")
    async def revoke_refresh(body: RefreshTokenIn) -> dict[str, bool]:
        grant = sim.refresh_grants.get(body.refresh_token)
        if grant is None:
            # The token itself is never echoed back.
            raise HTTPException(status_code=404, detail="unknown refresh token")
        grant.revoked = True
        return {"revoked": True}
