"""The provider simulator's HTTP surface.

Handlers read the request body (the only await before the work, besides injected
latency), then check and spend quota synchronously. The event loop runs one
handler's synchronous part at a time, so two requests can never both pass a check
that only one of them should: no lock is needed, and none may be added around an
``await`` that would let another request interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from simulator import codex
from simulator.messages import Reply, new_request_id, sse_frame
from simulator.ratelimit import unified_headers
from simulator.redteam import ToolScript
from simulator.state import (
    CODEX_WINDOWS,
    AuthKind,
    Credential,
    CredentialKind,
    LatencyScope,
    RequestRecord,
    SignIn,
    Simulator,
    Window,
    iso,
    token_kind,
)
from trinity_contract.prices import ANTHROPIC

logger = logging.getLogger("simulator")

CREDIT_TOO_LOW = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
RATE_LIMITED = "This request would exceed your account's rate limit. Please try again later."
OAUTH_REVOKED = "OAuth token has been revoked. Please obtain a new token."
USAGE_RATE_LIMITED = "Rate limited. Please try again later."
USAGE_SCOPE_MISSING = "OAuth token does not meet scope requirement user:profile"
CODEX_REVOKED = "Your authentication token has been invalidated. Please try signing in again."
# What the Anthropic API answers during an outage, by status (the error type and message
# its SDKs and the CLI read).
UPSTREAM_ERRORS = {
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    504: ("api_error", "Gateway timeout"),
    529: ("overloaded_error", "Overloaded"),
}
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def control_allowed_from() -> frozenset[str]:
    """Who may call the control API: loopback, plus the addresses SIMULATOR_CONTROL_FROM
    lists (comma-separated): a simulator on a container network's gateway is controlled
    by the host from that gateway address, which no container on the network has."""
    extra = os.environ.get("SIMULATOR_CONTROL_FROM", "")
    return frozenset(LOOPBACK | {a.strip() for a in extra.split(",") if a.strip()})


def anthropic_error(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def codex_error(status: int, code: str, message: str) -> JSONResponse:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return JSONResponse(body, status_code=status)


def bearer_token(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Outcome:
    """What a handler decided, kept for the request log and the log line."""

    def __init__(self, request: Request, *, stream: bool = False) -> None:
        self.method = request.method
        self.path = request.url.path
        self.credential: Credential | None = None
        self.model: str | None = None
        self.stream = stream
        # How many messages the request carried: a resumed conversation sends its history.
        self.messages = 0
        self.request_id = new_request_id()


# control API bodies


class CredentialIn(BaseModel):
    token: str = Field(min_length=8)
    kind: CredentialKind
    label: str | None = None
    capacity: dict[str, int] | None = None
    credit_usd: float | None = None
    usage_scope: bool | None = None
    plan_type: str | None = None
    usage_delay_ms: int | None = Field(default=None, ge=0, le=600_000)
    # Codex (ChatGPT sign-in) only: simulator/codex.py.
    account_id: str | None = Field(default=None, min_length=1)
    refresh_token: str | None = Field(default=None, min_length=8)
    expires_in: int | None = Field(default=None, ge=1)
    email: str | None = None
    user_id: str | None = Field(default=None, min_length=1)

    def sign_in(self) -> SignIn | None:
        fields = (self.account_id, self.refresh_token, self.expires_in, self.email, self.user_id)
        if all(value is None for value in fields):
            return None
        return SignIn(*fields)


class UsageThrottleIn(BaseModel):
    token: str
    seconds: float = Field(ge=0)


class UsageIn(BaseModel):
    token: str
    window: str
    percent: float | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    resets_in: float | None = Field(default=None, gt=0)


class ResetJitterIn(BaseModel):
    token: str
    offsets: list[int] = Field(default_factory=list, max_length=100)


class RevokeIn(BaseModel):
    token: str
    revoked: bool = True


class CreditIn(BaseModel):
    token: str
    add_usd: float


class ScopeIn(BaseModel):
    token: str
    allowed: bool


class ClockSetIn(BaseModel):
    at: datetime | float


class ClockAdvanceIn(BaseModel):
    seconds: float


class LatencyIn(BaseModel):
    ms: int = Field(ge=0, le=60_000)
    scope: LatencyScope = "all"


class UpstreamErrorIn(BaseModel):
    # 0 lifts the outage.
    status: int = Field(ge=0)
    retryable: bool = True


class RedTeamIn(BaseModel):
    trigger: str = Field(min_length=8)
    reads: list[str] = Field(default_factory=list, max_length=5000)
    commands: list[str] = Field(default_factory=list, max_length=100)


class ModelIn(BaseModel):
    name: str = Field(min_length=1)


def create_app(sim: Simulator | None = None) -> FastAPI:
    """The simulator app over ``sim`` (a fresh world when None)."""
    sim = sim or Simulator()
    app = FastAPI(title="provider simulator", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.simulator = sim

    def finish(outcome: Outcome, response: Response, *, quiet: bool = False) -> Response:
        cred = outcome.credential
        auth_kind: AuthKind = cred.kind if cred else "none"
        label = cred.label if cred else None
        response.headers["request-id"] = outcome.request_id
        sim.record(
            RequestRecord(
                at=sim.clock.now(),
                request_id=outcome.request_id,
                method=outcome.method,
                path=outcome.path,
                auth_kind=auth_kind,
                credential=label,
                model=outcome.model,
                status=response.status_code,
                stream=outcome.stream,
                messages=outcome.messages,
            )
        )
        logger.log(
            logging.DEBUG if quiet else logging.INFO,
            "%s %s %s credential=%s model=%s",
            outcome.method,
            outcome.path,
            response.status_code,
            label or "-",
            outcome.model or "-",
        )
        return response

    # Held answers wait on this event as well as on their delay: a latency change
    # releases every answer the old latency was holding, so a test that made the
    # upstream hang can end the hang instead of waiting it out.
    held: dict[str, Any] = {"release": None, "in_flight": 0}

    def release_held() -> None:
        if held["release"] is not None:
            held["release"].set()
        held["release"] = None

    async def inject_latency(*, usage: bool) -> None:
        delay_ms = sim.latency_all_ms + (sim.latency_usage_ms if usage else 0)
        if delay_ms:
            if held["release"] is None:
                held["release"] = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held["release"].wait(), delay_ms / 1000)

    @contextlib.asynccontextmanager
    async def in_flight() -> AsyncIterator[None]:
        """Count an API request until it is answered (and recorded) or abandoned."""
        held["in_flight"] += 1
        try:
            yield
        finally:
            held["in_flight"] -= 1

    def latency_view() -> dict[str, Any]:
        return {
            "all_ms": sim.latency_all_ms,
            "usage_ms": sim.latency_usage_ms,
            "in_flight": held["in_flight"],
        }

    # the Messages API

    def anthropic_credential(request: Request, outcome: Outcome) -> JSONResponse | None:
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
        return None

    def plan_headers(cred: Credential, model: str | None, *, served: bool) -> dict[str, str]:
        if cred.kind != "oauth":
            return {}
        now = sim.clock.now()
        cred.roll(now)
        windows = cred.applicable_windows(model or "")
        return unified_headers(windows, served=served, now=now, jitter=cred.next_jitter())

    def serve_messages(raw: bytes, request: Request, outcome: Outcome, *, count: bool) -> Response:
        refusal = anthropic_credential(request, outcome)
        cred = outcome.credential
        if refusal is not None or cred is None:
            return refusal or anthropic_error(401, "authentication_error", "invalid credential")
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = None
        model = body.get("model") if isinstance(body, dict) else None
        outcome.model = model if isinstance(model, str) else None
        outcome.stream = bool(isinstance(body, dict) and body.get("stream") is True and not count)
        if isinstance(body, dict) and isinstance(body.get("messages"), list):
            outcome.messages = len(body["messages"])
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
            headers = plan_headers(cred, outcome.model, served=False)
            return anthropic_error(401, "authentication_error", OAUTH_REVOKED, headers)
        if not isinstance(body, dict):
            headers = plan_headers(cred, None, served=False)
            return anthropic_error(400, "invalid_request_error", "body: invalid JSON", headers)
        if not isinstance(model, str) or not model:
            headers = plan_headers(cred, None, served=False)
            return anthropic_error(400, "invalid_request_error", "model: Field required", headers)
        if not isinstance(body.get("messages"), list):
            headers = plan_headers(cred, model, served=False)
            msg = "messages: Field required"
            return anthropic_error(400, "invalid_request_error", msg, headers)
        if not sim.is_known_model(model):
            headers = plan_headers(cred, model, served=False)
            return anthropic_error(404, "not_found_error", f"model: {model}", headers)

        reply = Reply(body, model)
        script = sim.red_team if not count else None

        def scripted(reply: Reply) -> Reply:
            # Only once the request passed every check: a refused request ran no tools.
            if script is None or not script.matches(body):
                return reply
            return Reply(body, model, scripted=script.answer(body))

        headers = {}
        if cred.kind == "oauth":
            decision = sim.check_quota(cred, model)
            if not decision.allowed and not count:
                headers = plan_headers(cred, model, served=False)
                # Retrying cannot help before the reset; say so to SDK clients.
                headers["x-should-retry"] = "false"
                return anthropic_error(429, "rate_limit_error", RATE_LIMITED, headers)
            if not count:
                reply = scripted(reply)
                sim.spend(cred, model, reply.total_tokens)
            # Counting is never refused, so it never reports "rejected" either.
            headers = plan_headers(cred, model, served=decision.allowed or count)
        elif not count:
            if cred.credit_usd <= 0:
                return anthropic_error(400, "invalid_request_error", CREDIT_TOO_LOW)
            reply = scripted(reply)
            sim.bill(cred, provider=ANTHROPIC, model=model, usage=reply.billed())

        if count:
            return JSONResponse({"input_tokens": reply.input_tokens}, headers=headers)
        if not outcome.stream:
            return JSONResponse(reply.message(), headers=headers)

        async def events() -> AsyncIterator[bytes]:
            for name, data in reply.sse_events():
                yield sse_frame(name, data)

        headers["cache-control"] = "no-cache"
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def answered(request: Request, serve: Callable[[bytes, Outcome], Response]) -> Response:
        """An API request's common steps: counted in flight, the injected latency, the
        body read (the only await), then ``serve``, synchronous from check to spend."""
        outcome = Outcome(request)
        async with in_flight():
            await inject_latency(usage=False)
            raw = await request.body()
            return finish(outcome, serve(raw, outcome))

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await answered(
            request, lambda raw, outcome: serve_messages(raw, request, outcome, count=False)
        )

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        return await answered(
            request, lambda raw, outcome: serve_messages(raw, request, outcome, count=True)
        )

    # the OpenAI side (simulator/codex.py)

    @app.post("/backend-api/codex/responses")
    async def codex_responses(request: Request) -> Response:
        return await answered(
            request, lambda raw, outcome: codex.serve_chatgpt(sim, raw, request, outcome)
        )

    @app.post("/v1/responses")
    async def platform_responses(request: Request) -> Response:
        return await answered(
            request, lambda raw, outcome: codex.serve_platform(sim, raw, request, outcome)
        )

    @app.post("/oauth/token")
    async def oauth_token(request: Request) -> Response:
        return await answered(request, lambda raw, outcome: codex.serve_refresh(sim, raw, outcome))

    # usage endpoints

    def window_usage(window: Window | None, jitter: int = 0) -> dict[str, Any] | None:
        if window is None:
            return None
        resets_at = window.resets_at()
        return {
            "utilization": round(window.utilization * 100, 2),
            "resets_at": iso(resets_at + jitter if resets_at is not None else None),
        }

    async def credential_delay(request: Request) -> None:
        """A registered credential's own usage delay (a provider hanging for it)."""
        token = bearer_token(request)
        cred = sim.credentials.get(token) if token else None
        if cred is not None and cred.usage_delay_ms:
            await asyncio.sleep(cred.usage_delay_ms / 1000)

    def serve_oauth_usage(request: Request, outcome: Outcome) -> Response:
        token = bearer_token(request)
        if token is None:
            return anthropic_error(401, "authentication_error", "OAuth authentication required")
        cred = sim.resolve(token, auto_kind="oauth" if token_kind(token) == "oauth" else None)
        outcome.credential = cred
        if cred is None or cred.kind != "oauth":
            return anthropic_error(401, "authentication_error", "Invalid bearer token")
        if cred.revoked:
            return anthropic_error(401, "authentication_error", OAUTH_REVOKED)
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
            name: window_usage(cred.windows.get(name), jitter)
            for name in ("five_hour", "seven_day", "seven_day_sonnet", "seven_day_opus")
        }
        body["seven_day_oauth_apps"] = None
        body["extra_usage"] = {
            "is_enabled": False,
            "monthly_limit": None,
            "used_credits": None,
            "utilization": None,
        }
        return JSONResponse(body)

    @app.get("/api/oauth/usage")
    async def oauth_usage(request: Request) -> Response:
        outcome = Outcome(request)
        async with in_flight():
            await inject_latency(usage=True)
            await credential_delay(request)
            return finish(outcome, serve_oauth_usage(request, outcome))

    def codex_window(window: Window, now: float) -> dict[str, Any]:
        reset_at = window.reset_unix(now)
        return {
            "used_percent": round(window.utilization * 100),
            "limit_window_seconds": window.duration,
            "reset_after_seconds": max(0, reset_at - int(now)),
            "reset_at": reset_at,
        }

    def serve_codex_usage(request: Request, outcome: Outcome) -> Response:
        token = bearer_token(request)
        if token is None:
            return codex_error(401, "missing_authorization", "Missing bearer token.")
        # A token the sign-in issued (rotated ones too), else an unknown one is taken
        # for a Codex plan token and auto-registered.
        issued = sim.codex_access(token)
        auto_kind: CredentialKind | None = "codex" if token_kind(token) is None else None
        cred = issued[0] if issued else sim.resolve(token, auto_kind=auto_kind)
        outcome.credential = cred
        if cred is None or cred.kind != "codex":
            return codex_error(401, "invalid_token", "Invalid bearer token.")
        if cred.revoked:
            return codex_error(401, "token_invalidated", CODEX_REVOKED)
        now = sim.clock.now()
        if issued and issued[1].expired(now):
            return codex_error(401, "token_expired", codex.TOKEN_EXPIRED)
        retry_after = cred.usage_retry_after(now)
        if retry_after is not None:
            throttled = codex_error(429, "rate_limit_exceeded", USAGE_RATE_LIMITED)
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
                    "primary_window": codex_window(primary, now),
                    "secondary_window": codex_window(secondary, now),
                },
                "credits": {"has_credits": False, "unlimited": False, "balance": "0"},
            }
        )

    @app.get("/backend-api/wham/usage")
    async def codex_usage(request: Request) -> Response:
        outcome = Outcome(request)
        async with in_flight():
            await inject_latency(usage=True)
            await credential_delay(request)
            return finish(outcome, serve_codex_usage(request, outcome))

    # the control API

    allowed = control_allowed_from()

    def loopback_only(request: Request) -> None:
        host = request.client.host if request.client else None
        if host not in allowed:
            raise HTTPException(status_code=403, detail="control API is loopback only")

    control = APIRouter(prefix="/_control", dependencies=[Depends(loopback_only)])

    def known(token: str) -> Credential:
        try:
            return sim.lookup(token)
        except KeyError:
            # The token itself is never echoed back.
            raise HTTPException(status_code=404, detail="unknown credential") from None

    def clock_view() -> dict[str, Any]:
        now = sim.clock.now()
        return {"now": iso(now), "unix": now, "frozen": sim.clock.frozen_at is not None}

    @control.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True}

    @control.post("/credentials")
    async def register(body: CredentialIn) -> dict[str, object]:
        try:
            cred = sim.register(
                token=body.token,
                kind=body.kind,
                label=body.label,
                capacity=body.capacity,
                credit_usd=body.credit_usd,
                usage_scope=body.usage_scope,
                plan_type=body.plan_type,
                usage_delay_ms=body.usage_delay_ms,
                sign_in=body.sign_in(),
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return cred.view(sim.clock.now())

    @control.get("/credentials")
    async def credentials(label: str | None = None) -> list[dict[str, object]]:
        now = sim.clock.now()
        return [c.view(now) for c in sim.credentials.values() if label is None or c.label == label]

    @control.post("/credentials/usage")
    async def set_usage(body: UsageIn) -> dict[str, object]:
        known(body.token)
        try:
            cred = sim.set_usage(
                body.token,
                body.window,
                percent=body.percent,
                tokens=body.tokens,
                resets_in=body.resets_in,
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return cred.view(sim.clock.now())

    @control.post("/credentials/reset-jitter")
    async def reset_jitter(body: ResetJitterIn) -> dict[str, object]:
        cred = known(body.token)
        if any(abs(offset) > 3600 for offset in body.offsets):
            raise HTTPException(status_code=400, detail="a jitter offset is at most 3600 s")
        cred.reset_jitter, cred.jitter_turn = list(body.offsets), 0
        return cred.view(sim.clock.now())

    @control.post("/credentials/revoke")
    async def revoke(body: RevokeIn) -> dict[str, object]:
        cred = known(body.token)
        cred.revoked = body.revoked
        return cred.view(sim.clock.now())

    @control.post("/credentials/credit")
    async def add_credit(body: CreditIn) -> dict[str, object]:
        cred = known(body.token)
        cred.credit_usd += body.add_usd
        return cred.view(sim.clock.now())

    @control.post("/credentials/usage-scope")
    async def usage_scope(body: ScopeIn) -> dict[str, object]:
        cred = known(body.token)
        cred.usage_scope = body.allowed
        return cred.view(sim.clock.now())

    @control.post("/credentials/usage-throttle")
    async def usage_throttle(body: UsageThrottleIn) -> dict[str, object]:
        cred = known(body.token)
        now = sim.clock.now()
        cred.usage_throttled_until = now + body.seconds if body.seconds else None
        return cred.view(now)

    @control.get("/clock")
    async def clock() -> dict[str, Any]:
        return clock_view()

    @control.post("/clock/set")
    async def clock_set(body: ClockSetIn) -> dict[str, Any]:
        at = body.at
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise HTTPException(status_code=400, detail="clock instant must carry a timezone")
            sim.clock.set(at.timestamp())
        else:
            sim.clock.set(float(at))
        return clock_view()

    @control.post("/clock/advance")
    async def clock_advance(body: ClockAdvanceIn) -> dict[str, Any]:
        sim.clock.advance(body.seconds)
        return clock_view()

    @control.post("/clock/real")
    async def clock_real() -> dict[str, Any]:
        sim.clock.use_real_time()
        return clock_view()

    @control.get("/requests")
    async def requests() -> list[dict[str, object]]:
        return [r.as_dict() for r in sim.requests]

    @control.delete("/requests")
    async def clear_requests() -> dict[str, Any]:
        sim.requests.clear()
        return {"ok": True}

    @control.get("/latency")
    async def latency() -> dict[str, Any]:
        return latency_view()

    @control.post("/latency")
    async def set_latency(body: LatencyIn) -> dict[str, Any]:
        if body.scope == "all":
            sim.latency_all_ms = body.ms
        else:
            sim.latency_usage_ms = body.ms
        release_held()
        return latency_view()

    def upstream_error_view() -> dict[str, Any]:
        return {"status": sim.upstream_error_status, "retryable": sim.upstream_error_retryable}

    @control.get("/upstream-error")
    async def upstream_error() -> dict[str, Any]:
        return upstream_error_view()

    @control.post("/upstream-error")
    async def set_upstream_error(body: UpstreamErrorIn) -> dict[str, Any]:
        if body.status and body.status not in UPSTREAM_ERRORS:
            known_statuses = ", ".join(str(s) for s in sorted(UPSTREAM_ERRORS))
            raise HTTPException(
                status_code=400, detail=f"status must be 0 or one of {known_statuses}"
            )
        sim.upstream_error_status = body.status
        sim.upstream_error_retryable = body.retryable
        return upstream_error_view()

    # The scripted tool-using model (simulator/redteam.py). Its view carries what the
    # agent's tools returned, verbatim: the red-team test's evidence.

    @control.post("/red-team")
    async def arm_red_team(body: RedTeamIn) -> dict[str, Any]:
        sim.red_team = ToolScript(trigger=body.trigger, reads=body.reads, commands=body.commands)
        return sim.red_team.view()

    @control.get("/red-team")
    async def red_team() -> dict[str, Any]:
        return sim.red_team.view() if sim.red_team is not None else {}

    @control.delete("/red-team")
    async def disarm_red_team() -> dict[str, Any]:
        sim.red_team = None
        return {"ok": True}

    @control.get("/models")
    async def models() -> list[str]:
        return sorted(sim.models)

    @control.post("/models")
    async def add_model(body: ModelIn) -> list[str]:
        sim.models.add(body.name)
        return sorted(sim.models)

    @control.post("/reset")
    async def reset() -> dict[str, Any]:
        sim.reset()
        release_held()
        return {"ok": True}

    codex.add_codex_control(control, sim, known)
    app.include_router(control)

    @app.exception_handler(RequestValidationError)
    async def invalid_control_body(request: Request, exc: RequestValidationError) -> Response:
        # The default handler echoes the input, which may hold a token.
        errors = [{"loc": e.get("loc"), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.api_route(
        "/{path:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        include_in_schema=False,
    )
    async def not_found(request: Request, path: str) -> Response:
        outcome = Outcome(request)
        token = request.headers.get("x-api-key") or bearer_token(request)
        issued = sim.codex_access(token) if token else None
        # A rotated Codex access token still names its credential in the log.
        outcome.credential = issued[0] if issued else sim.credentials.get(token or "")
        response = anthropic_error(404, "not_found_error", "Not found")
        if request.url.path.startswith("/_control/"):
            response.headers["request-id"] = outcome.request_id
            return response
        return finish(outcome, response, quiet=True)

    return app
