"""The Anthropic side: the Messages API (and its token count) and the plans' usage
endpoint, as the Claude Code CLI and the SDKs call them.

Every ``serve_*`` function here is synchronous: the route awaited the body already, so
a check and its spend never interleave with another request (``answering.py``).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from simulator.answering import USAGE_RATE_LIMITED, Answering, Outcome, bearer_token
from simulator.messages import Reply, paced, sse_frame
from simulator.ratelimit import unified_headers
from simulator.state import Credential, Simulator, Window, iso, token_kind
from trinity_contract.prices import ANTHROPIC

CREDIT_TOO_LOW = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
RATE_LIMITED = "This request would exceed your account's rate limit. Please try again later."
OAUTH_REVOKED = "OAuth token has been revoked. Please obtain a new token."
OAUTH_EXPIRED = "OAuth token has expired. Please obtain a new token or refresh your existing token."
USAGE_SCOPE_MISSING = "OAuth token does not meet scope requirement user:profile"
# What the Anthropic API answers during an outage, by status (the error type and message
# its SDKs and the CLI read).
UPSTREAM_ERRORS = {
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    504: ("api_error", "Gateway timeout"),
    529: ("overloaded_error", "Overloaded"),
}
USAGE_WINDOWS = ("five_hour", "seven_day", "seven_day_sonnet", "seven_day_opus")


def add_anthropic_routes(app: FastAPI, answering: Answering) -> None:
    """Mount the Messages API, its token count and the plans' usage endpoint on ``app``."""
    sim = answering.sim

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_messages(sim, raw, request, outcome, count=False)
        )

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        return await answering.answered(
            request, lambda raw, outcome: serve_messages(sim, raw, request, outcome, count=True)
        )

    @app.get("/api/oauth/usage")
    async def oauth_usage(request: Request) -> Response:
        return await answering.usage_answered(
            request, lambda outcome: serve_oauth_usage(sim, request, outcome)
        )


def anthropic_error(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The Anthropic error shape: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


# the Messages API


def serve_messages(
    sim: Simulator, raw: bytes, request: Request, outcome: Outcome, *, count: bool
) -> Response:
    """A Messages request (``count``: a token count) of body ``raw``: its credential
    resolved, the request checked, charged and answered, with ``outcome`` filled in."""
    refusal = anthropic_credential(sim, request, outcome)
    cred = outcome.credential
    if refusal is not None or cred is None:
        return refusal or anthropic_error(401, "authentication_error", "invalid credential")
    body = read_body(raw, outcome, count=count)
    checked = checked_request(sim, cred, body, outcome.model)
    if isinstance(checked, Response):
        return checked
    request_body, model = checked
    charged = charged_reply(sim, cred, request_body, model, count=count)
    if isinstance(charged, Response):
        return charged
    reply, headers = charged
    if count:
        return JSONResponse({"input_tokens": reply.input_tokens}, headers=headers)
    if not outcome.stream:
        return JSONResponse(reply.message(), headers=headers)

    frames = (sse_frame(name, data) for name, data in reply.sse_events())
    headers["cache-control"] = "no-cache"
    return StreamingResponse(paced(sim, frames), media_type="text/event-stream", headers=headers)


def anthropic_credential(sim: Simulator, request: Request, outcome: Outcome) -> JSONResponse | None:
    """Resolve the caller's credential into ``outcome``; an error response if refused.

    Either header carries either kind: the CLI sends keys as ``x-api-key`` and
    plan tokens as a bearer, while newer SDKs send keys as a bearer too.
    """
    api_key = request.headers.get("x-api-key")
    token = api_key or bearer_token(request)
    if token is None:
        return anthropic_error(401, "authentication_error", "x-api-key header is required")
    cred = sim.resolve(token, auto_kind=token_kind(token))
    outcome.credential = cred
    if cred is None or cred.kind in ("codex", "openai_key"):
        message = "invalid x-api-key" if api_key else "Invalid bearer token"
        return anthropic_error(401, "authentication_error", message)
    if cred.kind == "api_key" and cred.revoked:
        return anthropic_error(401, "authentication_error", "invalid x-api-key")
    if access_expired(sim, token):
        return anthropic_error(401, "authentication_error", OAUTH_EXPIRED)
    return None


def access_expired(sim: Simulator, token: str) -> bool:
    """Whether ``token`` is an access token a Claude sign-in issued that has expired
    (a registered plan token without a sign-in never expires)."""
    grant = sim.access_grants.get(token)
    return grant is not None and grant.expired(sim.clock.now())


def read_body(raw: bytes, outcome: Outcome, *, count: bool) -> Any:
    """The request's JSON body (None: not JSON), with what the request log keeps of it
    (its model, whether it streams, how many messages) put in ``outcome``."""
    try:
        body: Any = json.loads(raw or b"null")
    except ValueError:
        body = None
    model = body.get("model") if isinstance(body, dict) else None
    outcome.model = model if isinstance(model, str) else None
    outcome.stream = bool(isinstance(body, dict) and body.get("stream") is True and not count)
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        outcome.messages = len(body["messages"])
    return body


def checked_request(
    sim: Simulator, cred: Credential, body: Any, model: str | None
) -> Response | tuple[dict[str, Any], str]:
    """Why the request is refused before anything is charged (an outage, a revoked plan,
    a malformed body, an unknown model), else its ``body`` and ``model``."""
    if sim.upstream_error_status:
        # The provider is down for everyone: no request is checked or
        # spent, whatever its credential.
        error_type, message = UPSTREAM_ERRORS[sim.upstream_error_status]
        retry = "true" if sim.upstream_error_retryable else "false"
        return anthropic_error(
            sim.upstream_error_status, error_type, message, {"x-should-retry": retry}
        )
    if cred.revoked:
        # Only OAuth credentials get here revoked: a revoked key was refused above.
        headers = plan_headers(sim, cred, model, served=False)
        return anthropic_error(401, "authentication_error", OAUTH_REVOKED, headers)
    if not isinstance(body, dict):
        headers = plan_headers(sim, cred, None, served=False)
        return anthropic_error(400, "invalid_request_error", "body: invalid JSON", headers)
    if not model:
        headers = plan_headers(sim, cred, None, served=False)
        return anthropic_error(400, "invalid_request_error", "model: Field required", headers)
    if not isinstance(body.get("messages"), list):
        headers = plan_headers(sim, cred, model, served=False)
        msg = "messages: Field required"
        return anthropic_error(400, "invalid_request_error", msg, headers)
    if not sim.is_known_model(model):
        headers = plan_headers(sim, cred, model, served=False)
        return anthropic_error(404, "not_found_error", f"model: {model}", headers)
    return body, model


def charged_reply(
    sim: Simulator, cred: Credential, body: dict[str, Any], model: str, *, count: bool
) -> Response | tuple[Reply, dict[str, str]]:
    """The reply to a checked request and its headers, charged to ``cred`` (a plan's
    quota, a key's credit); or the refusal when there is nothing left to charge. A
    token count (``count``) charges nothing and is never refused."""
    reply = Reply(body, model)
    if cred.kind == "oauth":
        decision = sim.check_quota(cred, model)
        if not decision.allowed and not count:
            headers = plan_headers(sim, cred, model, served=False)
            # Retrying cannot help before the reset; say so to SDK clients.
            headers["x-should-retry"] = "false"
            return anthropic_error(429, "rate_limit_error", RATE_LIMITED, headers)
        if not count:
            reply = scripted_reply(sim, body, model, reply)
            sim.spend(cred, model, reply.total_tokens)
        # Counting is never refused, so it never reports "rejected" either.
        return reply, plan_headers(sim, cred, model, served=decision.allowed or count)
    if not count:
        if cred.credit_usd <= 0:
            return anthropic_error(400, "invalid_request_error", CREDIT_TOO_LOW)
        reply = scripted_reply(sim, body, model, reply)
        sim.bill(cred, provider=ANTHROPIC, model=model, usage=reply.billed())
    return reply, {}


def scripted_reply(sim: Simulator, body: dict[str, Any], model: str, reply: Reply) -> Reply:
    """The armed red-team script's answer when ``body`` triggers it, else ``reply``.
    Asked only once the request passed every check: a refused request ran no tools."""
    script = sim.red_team
    if script is None or not script.matches(body):
        return reply
    return Reply(body, model, scripted=script.answer(body))


def plan_headers(
    sim: Simulator, cred: Credential, model: str | None, *, served: bool
) -> dict[str, str]:
    """A plan's unified rate-limit headers for ``model`` (none for a key)."""
    if cred.kind != "oauth":
        return {}
    now = sim.clock.now()
    cred.roll(now)
    windows = cred.applicable_windows(model or "")
    return unified_headers(windows, served=served, now=now, jitter=cred.next_jitter())


# the plans' usage endpoint


def serve_oauth_usage(sim: Simulator, request: Request, outcome: Outcome) -> Response:
    """A plan token's usage: each window's utilization and reset, as the CLI reads it."""
    token = bearer_token(request)
    if token is None:
        return anthropic_error(401, "authentication_error", "OAuth authentication required")
    cred = sim.resolve(token, auto_kind="oauth" if token_kind(token) == "oauth" else None)
    outcome.credential = cred
    if cred is None or cred.kind != "oauth":
        return anthropic_error(401, "authentication_error", "Invalid bearer token")
    if cred.revoked:
        return anthropic_error(401, "authentication_error", OAUTH_REVOKED)
    if access_expired(sim, token):
        return anthropic_error(401, "authentication_error", OAUTH_EXPIRED)
    retry_after = cred.usage_retry_after(sim.clock.now())
    if retry_after is not None:
        return anthropic_error(
            429, "rate_limit_error", USAGE_RATE_LIMITED, {"retry-after": str(retry_after)}
        )
    if not cred.usage_scope:
        return anthropic_error(403, "permission_error", USAGE_SCOPE_MISSING)
    cred.roll(sim.clock.now())
    jitter = cred.next_jitter()
    body: dict[str, Any] = {
        name: window_usage(cred.windows.get(name), jitter) for name in USAGE_WINDOWS
    }
    body["seven_day_oauth_apps"] = None
    body["extra_usage"] = {
        "is_enabled": False,
        "monthly_limit": None,
        "used_credits": None,
        "utilization": None,
    }
    return JSONResponse(body)


def window_usage(window: Window | None, jitter: int = 0) -> dict[str, Any] | None:
    """One window as the usage endpoint shows it (None: the plan has no such window)."""
    if window is None:
        return None
    resets_at = window.resets_at()
    return {
        "utilization": round(window.utilization * 100, 2),
        "resets_at": iso(resets_at + jitter if resets_at is not None else None),
    }
