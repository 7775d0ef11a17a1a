"""The HTTP surface: /health, /api/task, /api/chat, /api/credentials/reload-token."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agent_server.config import AgentConfig
from agent_server.contract import (
    AUTH_OVERRIDE_HEADER,
    ERROR_STATUS,
    ChatRequest,
    ChatResponse,
    ErrorBody,
    ErrorCode,
    HealthResponse,
    ReloadTokenRequest,
    ReloadTokenResponse,
    TaskRequest,
    TaskResponse,
    Usage,
)
from agent_server.errors import TurnError
from agent_server.logjson import turn_log_context
from agent_server.redaction import Redactor
from agent_server.runtimes.anthropic_api import AnthropicApiRuntime
from agent_server.runtimes.base import Clock, Runtime, Turn
from agent_server.runtimes.claude_code import ClaudeCodeRuntime
from agent_server.state import AgentState

logger = logging.getLogger("agent_server")

UNAUTHENTICATED_PATHS = frozenset({"/health"})


def utc_now() -> datetime:
    return datetime.now(UTC)


def build_runtime(config: AgentConfig, clock: Clock) -> Runtime:
    if config.runtime == "anthropic-api":
        assert config.model is not None  # load_config requires it for this runtime
        return AnthropicApiRuntime(default_model=config.model, clock=clock)
    return ClaudeCodeRuntime(
        binary=config.claude_bin, clock=clock, allowed_tools=config.allowed_tools
    )


def create_app(
    config: AgentConfig,
    *,
    runtime: Runtime | None = None,
    baseline: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
    clock: Clock = utc_now,
) -> FastAPI:
    """Build the app. `baseline` defaults to this process's environment, read now."""
    redactor = redactor or Redactor()
    state = AgentState(
        config,
        baseline=dict(os.environ) if baseline is None else baseline,
        redactor=redactor,
    )
    runtime = runtime or build_runtime(config, clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await runtime.aclose()

    app = FastAPI(title="Trinity agent server", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.agent = state
    app.state.runtime = runtime

    def error_response(
        code: ErrorCode,
        detail: str,
        *,
        execution_id: str | None,
        resets_at: datetime | None = None,
        limiting_window: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> JSONResponse:
        body = ErrorBody(
            error_code=code,
            detail=redactor.redact(detail),
            execution_id=execution_id,
            resets_at=resets_at,
            limiting_window=limiting_window,
        )
        return JSONResponse(
            body.model_dump(mode="json"), status_code=ERROR_STATUS[code], headers=headers
        )

    @app.middleware("http")
    async def require_secret(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.url.path in UNAUTHENTICATED_PATHS:
            return await call_next(request)
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), config.secret.encode()
        ):
            return error_response(
                "unauthorized",
                "missing or wrong bearer secret",
                execution_id=None,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Only locations and messages: pydantic's `input` would echo the body back,
        # credentials included.
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err.get('loc', ()))}: {err.get('msg', 'invalid')}"
            for err in exc.errors()
        )
        return error_response("invalid_request", problems or "invalid body", execution_id=None)

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse(runtime=config.runtime, model=config.model, busy=state.busy)

    @app.post("/api/task", response_model=TaskResponse)
    async def task(body: TaskRequest) -> Response:
        return await run_turn(body, session_id=None)

    @app.post("/api/chat", response_model=ChatResponse)
    async def chat(body: ChatRequest) -> Response:
        return await run_turn(body, session_id=body.session_id)

    @app.post("/api/credentials/reload-token", response_model=ReloadTokenResponse)
    async def reload_token(body: ReloadTokenRequest) -> Response:
        token = body.token.get_secret_value().strip()
        if not token:
            return error_response("invalid_request", "token must not be empty", execution_id=None)
        try:
            shadow = state.reload_token(token, remove_api_key=body.remove_api_key)
        except OSError as exc:
            logger.error("reload-token: cannot write the token file: %s", exc)
            return error_response(
                "container_fault",
                f"cannot write the token file: {exc.strerror or exc}",
                execution_id=None,
            )
        logger.info(
            "reload-token: next spawns use the new OAuth token (remove_api_key=%s, env_shadow=%s)",
            body.remove_api_key,
            shadow,
        )
        return JSONResponse(ReloadTokenResponse(env_shadow=shadow).model_dump(mode="json"))

    async def run_turn(body: TaskRequest, *, session_id: str | None) -> Response:
        # Every line this turn logs carries the platform's execution id (LOG_FORMAT=json).
        with turn_log_context(body.execution_id):
            return await _run_turn(body, session_id=session_id)

    async def _run_turn(body: TaskRequest, *, session_id: str | None) -> Response:
        override = body.auth_override.applied() if body.auth_override else None
        headers = {AUTH_OVERRIDE_HEADER: override.kind} if override else {}
        timeout = body.timeout_seconds
        if config.timeout_max is not None:
            timeout = min(timeout, config.timeout_max)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        logger.info(
            "turn %s: start runtime=%s model=%s session=%s override=%s timeout=%gs",
            body.execution_id,
            runtime.name,
            body.model or config.model or "(runtime default)",
            session_id or "-",
            override.kind if override else "-",
            timeout,
        )
        lock = state.session_lock(session_id) if session_id is not None else None
        state.busy += 1
        home = None
        try:
            if lock is not None:
                try:
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can time out after
                    # the inner acquire succeeded, leaking the lock forever.
                    async with asyncio.timeout(timeout):
                        await lock.acquire()
                except TimeoutError:
                    raise TurnError(
                        "timeout",
                        f"session {session_id} was busy with an earlier turn for the whole "
                        f"timeout_seconds={timeout:g}",
                    ) from None
            try:
                home = state.new_spawn_home(session_id)
                env = state.spawn_env(override, home)
                outcome = await runtime.run(
                    Turn(
                        execution_id=body.execution_id,
                        message=body.message,
                        model=body.model or config.model,
                        timeout_seconds=max(deadline - loop.time(), 0.001),
                        home=home,
                        cwd=config.home,
                        session_id=session_id,
                    ),
                    env,
                )
            finally:
                if lock is not None:
                    lock.release()
        except TurnError as exc:
            logger.warning(
                "turn %s: %s (%s)", body.execution_id, exc.error_code, redactor.redact(exc.detail)
            )
            return error_response(
                exc.error_code,
                exc.detail,
                execution_id=body.execution_id,
                resets_at=exc.resets_at,
                limiting_window=exc.limiting_window,
                headers=headers,
            )
        except Exception as exc:
            logger.exception("turn %s: internal error", body.execution_id)
            return error_response(
                "container_fault",
                f"internal error in the agent server: {type(exc).__name__}",
                execution_id=body.execution_id,
                headers=headers,
            )
        finally:
            state.busy -= 1
            if home is not None and session_id is None:
                state.discard_spawn_home(home)
        logger.info(
            "turn %s: ok model=%s tokens=%s/%s",
            body.execution_id,
            outcome.model,
            outcome.input_tokens,
            outcome.output_tokens,
        )
        payload = TaskResponse(
            execution_id=body.execution_id,
            # An answer can quote the environment (the agent's tools can read it).
            response=redactor.redact(outcome.response),
            model=outcome.model,
            usage=Usage(input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens),
            cost_usd=outcome.cost_usd,
        )
        if session_id is not None:
            payload = ChatResponse(**payload.model_dump(), session_id=session_id)
        return JSONResponse(payload.model_dump(mode="json"), headers=headers)

    return app
