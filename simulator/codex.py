"""The OpenAI side the Codex CLI calls: the ChatGPT backend's Responses endpoint, the
platform's ``/v1/responses``, the sign-in refresh, the plan's usage endpoint, and their
control calls.

Like ``simulator/anthropic.py``, every ``serve_*`` function here is synchronous: the
route awaited the body already, so a check and its spend never interleave with another
request. ``add_openai_routes`` mounts them, each answered and recorded as
``simulator/answering.py`` answers every API request.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from simulator.answering import USAGE_RATE_LIMITED, Answering
from simulator.messages import ECHO_CHARS, REPLY_PREFIX, paced, sse_frame, tokens_for
from simulator.ratelimit import representative
from simulator.state import (
    CODEX_WINDOWS,
    AccessGrant,
    Credential,
    CredentialKind,
    RefreshRefused,
    Simulator,
    Window,
    token_kind,
)
from trinity_contract.prices import OPENAI, TokenUsage

ACCOUNT_HEADER = "chatgpt-account-id"
AUTH_CLAIM = "https://api.openai.com/auth"
# Access tokens without an expiry still carry one in their JWT: far enough away.
NEVER_EXPIRES_S = 10 * 365 * 86400
# Error messages, not secrets.
TOKEN_INVALIDATED = "Your authentication token has been invalidated. Please try signing in again."  # noqa: S105
TOKEN_EXPIRED = "Provided authentication token is expired. Please try signing in again."  # noqa: S105
USAGE_LIMIT = "The usage limit has been reached"
INVALID_KEY = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
INSUFFICIENT_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"
REFRESH_REFUSALS = {
    "refresh_token_expired": "Your refresh token has expired. Please sign in again.",
    "refresh_token_invalidated": "Your refresh token has been invalidated. Please sign in again.",
    "refresh_token_reused": (
        "Your refresh token has already been used to generate a new access token. "
        "Please try signing in again."
    ),
}


def add_openai_routes(app: FastAPI, answering: Answering) -> None:
    """Mount the ChatGPT backend's and the platform's Responses endpoints and the plan's
    usage endpoint on ``app`` (the sign-in's ``/oauth/token``: ``simulator/oauth.py``)."""
    sim = answering.sim

    @app.post("/backend-api/codex/responses")
    async def codex_responses(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_chatgpt(sim, raw, request, outcome)
        )

    @app.post("/v1/responses")
    async def platform_responses(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_platform(sim, raw, request, outcome)
        )

    @app.get("/backend-api/wham/usage")
    async def codex_usage(request: Request) -> Response:
        return await answering.usage_answered(
            request, lambda outcome: serve_usage(sim, request, outcome)
        )


class Outcome(Protocol):
    """What a handler fills in for the request log (``simulator.answering.Outcome``)."""

    credential: Credential | None
    model: str | None
    stream: bool
    messages: int


def openai_error(
    status: int,
    code: str | None,
    message: str,
    *,
    error_type: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The OpenAI error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def unsigned_jwt(payload: dict[str, Any]) -> str:
    """A JWT with ``alg: none``: the CLI reads the claims and checks no signature."""

    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}.sim"


# the request and the reply


def _item_text(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    content = item.get("content")
    blocks = content if isinstance(content, list) else [{"text": content}]
    parts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    parts += [item[k] for k in ("arguments", "output") if isinstance(item.get(k), str)]
    return "\n".join(p for p in parts if p)


def prompt_text(body: dict[str, Any]) -> str:
    """Everything a Responses request sends: its instructions and every input item."""
    parts = [body.get("instructions") if isinstance(body.get("instructions"), str) else ""]
    parts += [_item_text(item) for item in body.get("input") or []]
    return "\n".join(p for p in parts if p)


def last_user_text(body: dict[str, Any]) -> str:
    """The last plain text a user message carries. Codex sends its environment context
    (``<environment_context>…``) as user messages too; those are skipped."""
    for item in reversed(body.get("input") or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        text = _item_text(item)
        if text.strip() and not text.lstrip().startswith(("<", "# AGENTS.md")):
            return text
    return ""


class CodexReply:
    """One answer computed from a Responses request body: the echoing assistant
    message, or the output items of the armed red-team script (``scripted``)."""

    def __init__(
        self, body: dict[str, Any], model: str, scripted: list[dict[str, Any]] | None = None
    ) -> None:
        echo = " ".join(last_user_text(body).split())[:ECHO_CHARS]
        self.text = REPLY_PREFIX + echo if echo else REPLY_PREFIX.rstrip(": ") + "."
        self.model = model
        self.id = "resp_sim_" + secrets.token_hex(12)
        self.items = scripted or [
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_sim_" + secrets.token_hex(12),
                "status": "completed",
                "content": [{"type": "output_text", "text": self.text, "annotations": []}],
            }
        ]
        self.input_tokens = tokens_for(prompt_text(body))
        self.output_tokens = tokens_for("\n".join(_item_text(item) for item in self.items))

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def response(self) -> dict[str, Any]:
        """The finished Response object (the non-streaming answer)."""
        return {
            "id": self.id,
            "object": "response",
            "status": "completed",
            "model": self.model,
            "output": self.items,
            "usage": {
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.total_tokens,
            },
        }

    def sse_events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        created = {"id": self.id, "object": "response", "status": "in_progress"}
        yield "response.created", {"type": "response.created", "response": created}
        for index, item in enumerate(self.items):
            done = {"type": "response.output_item.done", "output_index": index, "item": item}
            yield "response.output_item.done", done
        yield "response.completed", {"type": "response.completed", "response": self.response()}

    def streamed(self, sim: Simulator, headers: dict[str, str]) -> StreamingResponse:
        frames = (sse_frame(name, data) for name, data in self.sse_events())
        headers["cache-control"] = "no-cache"
        return StreamingResponse(
            paced(sim, frames), media_type="text/event-stream", headers=headers
        )


def codex_reply(sim: Simulator, body: dict[str, Any], model: str) -> CodexReply:
    """The armed red-team script's answer when ``body`` triggers it, else the echo.
    Asked only once the request passed every check: a refused request ran no tools."""
    script = sim.red_team
    if script is None or not script.matches_responses(body):
        return CodexReply(body, model)
    return CodexReply(body, model, scripted=script.answer_responses(body))


def parse_body(raw: bytes, outcome: Outcome) -> dict[str, Any] | None:
    """The request body as a dict (None when it is not one), noted into ``outcome``."""
    try:
        body: Any = json.loads(raw or b"null")
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    model = body.get("model")
    outcome.model = model if isinstance(model, str) and model else None
    outcome.stream = body.get("stream") is True
    if isinstance(body.get("input"), list):
        outcome.messages = len(body["input"])
    return body


# the ChatGPT plan: /backend-api/codex/responses


def _percent(window: Window) -> str:
    return repr(round(window.utilization * 100, 2))


def rate_limit_headers(cred: Credential, now: float) -> dict[str, str]:
    """The ``x-codex-{primary,secondary}-*`` set the CLI reads its headroom from: the
    same windows and resets ``/backend-api/wham/usage`` reports."""
    cred.roll(now)
    headers: dict[str, str] = {}
    for prefix, name in zip(("primary", "secondary"), CODEX_WINDOWS, strict=True):
        window = cred.windows[name]
        reset_at = window.reset_unix(now)
        headers[f"x-codex-{prefix}-used-percent"] = _percent(window)
        headers[f"x-codex-{prefix}-window-minutes"] = str(window.duration // 60)
        headers[f"x-codex-{prefix}-reset-after-seconds"] = str(max(0, reset_at - math.floor(now)))
        headers[f"x-codex-{prefix}-reset-at"] = str(reset_at)
    # As /backend-api/wham/usage says: a plan without purchased credits.
    headers["x-codex-credits-has-credits"] = "false"
    headers["x-codex-credits-unlimited"] = "false"
    return headers


def plan_credential(
    sim: Simulator, request: Request, outcome: Outcome
) -> tuple[Credential, AccessGrant] | Response:
    """The Codex credential a ChatGPT-backend request authenticates as, or a refusal:
    401 without a known access token, 403 when ``chatgpt-account-id`` is not its
    account. Revocation and expiry are checked later, after an outage."""
    token = bearer(request)
    found = sim.codex_access(token) if token else None
    if found is None:
        if token is not None:
            outcome.credential = sim.credentials.get(token)
        return openai_error(401, "invalid_token", "Invalid bearer token.")
    cred = outcome.credential = found[0]
    account = request.headers.get(ACCOUNT_HEADER)
    if account != cred.account_id:
        message = f"The {ACCOUNT_HEADER} header does not match this token's account."
        headers = rate_limit_headers(cred, sim.clock.now())
        return openai_error(403, "account_mismatch", message, headers=headers)
    return found


def usage_limit(cred: Credential, windows: list[Window], now: float) -> JSONResponse:
    """429 ``usage_limit_reached`` naming the binding window's reset (the exhausted
    window that resets last: nothing serves before then)."""
    binding = representative(windows, served=False, now=now)
    resets_at = binding.reset_unix(now)
    error = {
        "type": "usage_limit_reached",
        "message": USAGE_LIMIT,
        "plan_type": cred.plan_type,
        "resets_at": resets_at,
        "resets_in_seconds": max(0, resets_at - math.floor(now)),
    }
    headers = rate_limit_headers(cred, now)
    return JSONResponse({"error": error}, status_code=429, headers=headers)


def outage(sim: Simulator, headers: dict[str, str] | None = None) -> Response | None:
    """The provider-wide 5xx while one is set (``upstream_error_status``), else None."""
    if not sim.upstream_error_status:
        return None
    return openai_error(
        sim.upstream_error_status, None, SERVER_ERROR, error_type="server_error", headers=headers
    )


def serve_chatgpt(sim: Simulator, raw: bytes, request: Request, outcome: Outcome) -> Response:
    """``POST /backend-api/codex/responses``: auth → outage → revoked → expired → body
    and model → stream → quota → the SSE answer, tokens spent on both windows."""
    found = plan_credential(sim, request, outcome)
    if isinstance(found, Response):
        return found
    cred, grant = found
    now = sim.clock.now()
    headers = rate_limit_headers(cred, now)
    body = parse_body(raw, outcome)
    if (down := outage(sim, headers)) is not None:
        return down
    if cred.revoked:
        return openai_error(401, "token_invalidated", TOKEN_INVALIDATED, headers=headers)
    if grant.expired(now):
        return openai_error(401, "token_expired", TOKEN_EXPIRED, headers=headers)
    model = outcome.model
    if body is None or model is None or not isinstance(body.get("input"), list):
        return JSONResponse({"detail": "Invalid request body"}, 400, headers=headers)
    if not sim.is_known_codex_model(model):
        detail = f"The '{model}' model is not supported when using Codex with a ChatGPT account."
        return JSONResponse({"detail": detail}, 400, headers=headers)
    if not outcome.stream:
        # The real backend streams only; so does the CLI.
        return JSONResponse({"detail": "Stream must be set to true"}, 400, headers=headers)
    decision = sim.check_quota(cred, model)
    if not decision.allowed:
        return usage_limit(cred, decision.windows, now)
    reply = codex_reply(sim, body, model)
    sim.spend(cred, model, reply.total_tokens)
    return reply.streamed(sim, rate_limit_headers(cred, now))


# the platform key: /v1/responses


def serve_platform(sim: Simulator, raw: bytes, request: Request, outcome: Outcome) -> Response:
    """``POST /v1/responses`` for an OpenAI platform key: auth → outage → revoked →
    body and model → credit → the answer (SSE, or one JSON object without ``stream``),
    charged per token. No plan windows, no rate-limit headers."""
    token = bearer(request)
    if token is None:
        return openai_error(401, None, NO_KEY)
    found = sim.codex_access(token)
    cred = outcome.credential = sim.credentials.get(token) or (found[0] if found else None)
    if cred is None or cred.kind != "openai_key":
        # A Codex plan token or an Anthropic credential is no platform key either.
        return openai_error(401, "invalid_api_key", INVALID_KEY)
    body = parse_body(raw, outcome)
    if (down := outage(sim)) is not None:
        return down
    if cred.revoked:
        return openai_error(401, "invalid_api_key", INVALID_KEY)
    model = outcome.model
    if body is not None and isinstance(body.get("input"), str):
        # The platform API takes a plain string as one user message (the backend does not).
        text = body["input"]
        body["input"] = [{"role": "user", "content": [{"type": "input_text", "text": text}]}]
    if body is None or model is None or not isinstance(body.get("input"), list):
        return openai_error(400, None, "Invalid request body: give model and input.")
    if not sim.is_known_codex_model(model):
        message = f"The model `{model}` does not exist or you do not have access to it."
        return openai_error(404, "model_not_found", message)
    if cred.credit_usd <= 0:
        return openai_error(
            429, "insufficient_quota", INSUFFICIENT_QUOTA, error_type="insufficient_quota"
        )
    reply = codex_reply(sim, body, model)
    # Billed as its usage reports: no cached input in the simulator's answers.
    usage = TokenUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
    sim.bill(cred, provider=OPENAI, model=model, usage=usage)
    if not outcome.stream:
        return JSONResponse(reply.response())
    return reply.streamed(sim, {})


# the sign-in refresh: /oauth/token


def refresh_request(raw: bytes) -> dict[str, Any]:
    """The refresh body: JSON (what the CLI sends) or a form (what RFC 6749 says)."""
    try:
        body: Any = json.loads(raw or b"null")
    except ValueError:
        body = dict(urllib.parse.parse_qsl(raw.decode(errors="replace")))
    return body if isinstance(body, dict) else {}


def minted_tokens(sim: Simulator, cred: Credential, expires_at: float | None) -> dict[str, Any]:
    """The claims the CLI reads: the account, the plan, the email, the expiry."""
    return chatgpt_claims(
        sim,
        plan_type=cred.plan_type,
        account_id=cred.account_id,
        user_id=cred.user_id,
        email=cred.email,
        expires_at=expires_at,
    )


def chatgpt_claims(
    sim: Simulator,
    *,
    plan_type: str,
    account_id: str | None,
    user_id: str | None,
    email: str | None,
    expires_at: float | None,
) -> dict[str, Any]:
    """A ChatGPT sign-in token's claims (``minted_tokens``; a new sign-in's too)."""
    now = sim.clock.now()
    exp = math.floor(expires_at if expires_at is not None else now + NEVER_EXPIRES_S)
    claims = {
        "chatgpt_plan_type": plan_type,
        "chatgpt_account_id": account_id,
        # The CLI compares the user and account before and after a refresh: a
        # different (or missing) user reads as another person signing in.
        "chatgpt_user_id": user_id,
    }
    return {
        "email": email or "codex-sim@example.invalid",
        "iat": math.floor(now),
        "exp": exp,
        "jti": secrets.token_hex(8),
        AUTH_CLAIM: claims,
    }


def serve_refresh(sim: Simulator, raw: bytes, outcome: Outcome) -> Response:
    """``POST /oauth/token`` with ``grant_type=refresh_token``: a new access token, id
    token and refresh token for the same credential (rotation); the presented refresh
    token is spent. Refusals are 401 with the codes the CLI classifies."""
    body = refresh_request(raw)
    if body.get("grant_type") != "refresh_token":
        return JSONResponse(
            {"error": {"code": "unsupported_grant_type", "message": "Unsupported grant type."}}, 400
        )
    presented = body.get("refresh_token")
    if not isinstance(presented, str) or not presented:
        return JSONResponse(
            {"error": {"code": "invalid_request", "message": "refresh_token is required."}}, 400
        )

    def mint(cred: Credential, expires_at: float | None) -> str:
        return unsigned_jwt(minted_tokens(sim, cred, expires_at))

    new_refresh = "rt_sim_" + secrets.token_urlsafe(24)
    try:
        cred, access_token = sim.rotate(presented, mint_access=mint, new_refresh=new_refresh)
    except RefreshRefused as refused:
        outcome.credential = refused.credential
        error = {"code": refused.code, "message": REFRESH_REFUSALS[refused.code]}
        return JSONResponse({"error": error}, 401)
    outcome.credential = cred
    lifetime = cred.access_lifetime
    return JSONResponse(
        {
            "id_token": unsigned_jwt(minted_tokens(sim, cred, cred.access_expires_at)),
            "access_token": access_token,
            "refresh_token": new_refresh,
            "token_type": "Bearer",
            "expires_in": lifetime if lifetime is not None else NEVER_EXPIRES_S,
            "scope": "openid profile email offline_access",
        }
    )


# the plan's usage: /backend-api/wham/usage


def serve_usage(sim: Simulator, request: Request, outcome: Outcome) -> Response:
    """A Codex plan's usage: its two windows and whether a limit is reached."""
    token = bearer(request)
    if token is None:
        return usage_error(401, "missing_authorization", "Missing bearer token.")
    # A token the sign-in issued (rotated ones too), else an unknown one is taken
    # for a Codex plan token and auto-registered.
    issued = sim.codex_access(token)
    auto_kind: CredentialKind | None = "codex" if token_kind(token) is None else None
    cred = issued[0] if issued else sim.resolve(token, auto_kind=auto_kind)
    outcome.credential = cred
    if cred is None or cred.kind != "codex":
        return usage_error(401, "invalid_token", "Invalid bearer token.")
    if cred.revoked:
        return usage_error(401, "token_invalidated", TOKEN_INVALIDATED)
    now = sim.clock.now()
    if issued and issued[1].expired(now):
        return usage_error(401, "token_expired", TOKEN_EXPIRED)
    retry_after = cred.usage_retry_after(now)
    if retry_after is not None:
        throttled = usage_error(429, "rate_limit_exceeded", USAGE_RATE_LIMITED)
        throttled.headers["retry-after"] = str(retry_after)
        return throttled
    cred.roll(now)
    primary, secondary = (cred.windows[n] for n in CODEX_WINDOWS)
    limit_reached = primary.exhausted or secondary.exhausted
    return JSONResponse(
        {
            "plan_type": cred.plan_type,
            "rate_limit": {
                "allowed": not limit_reached,
                "limit_reached": limit_reached,
                "primary_window": usage_window(primary, now),
                "secondary_window": usage_window(secondary, now),
            },
            "credits": {"has_credits": False, "unlimited": False, "balance": "0"},
        }
    )


def usage_window(window: Window, now: float) -> dict[str, Any]:
    """One window as the usage endpoint shows it."""
    reset_at = window.reset_unix(now)
    return {
        "used_percent": round(window.utilization * 100),
        "limit_window_seconds": window.duration,
        "reset_after_seconds": max(0, reset_at - int(now)),
        "reset_at": reset_at,
    }


def usage_error(status: int, code: str, message: str) -> JSONResponse:
    """The usage endpoint's error shape: the Responses API's without ``param``."""
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return JSONResponse(body, status_code=status)


# control calls


class TokenIn(BaseModel):
    token: str


class CodexModelIn(BaseModel):
    name: str = Field(min_length=1)


def add_codex_control(
    control: APIRouter, sim: Simulator, known: Callable[[str], Credential]
) -> None:
    """Mount the Codex control calls on ``control`` (loopback only, like the rest)."""

    @control.post("/credentials/expire-access")
    async def expire_access(body: TokenIn) -> dict[str, object]:
        cred = known(body.token)
        sim.expire_access(cred)
        return cred.view(sim.clock.now())

    @control.get("/codex-models")
    async def codex_models() -> list[str]:
        return sorted(sim.codex_models)

    @control.post("/codex-models")
    async def add_codex_model(body: CodexModelIn) -> list[str]:
        sim.codex_models.add(body.name)
        return sorted(sim.codex_models)
