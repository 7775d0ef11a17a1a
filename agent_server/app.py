"""The HTTP surface: /health, /api/task, /api/chat (plain or streamed),
/api/turns/{execution_id}/cancel, /api/credentials/reload-token."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agent_server.cancel import Cancellations
from agent_server.config import AgentConfig
from agent_server.confinement import Confinement, confinement_make
from agent_server.contract import (
    AUTH_OVERRIDE_HEADER,
    AppliedOverride,
    CancelResponse,
    ChatRequest,
    ChatResponse,
    ErrorBody,
    HealthResponse,
    Metered,
    ModelSpend,
    ReloadTokenRequest,
    ReloadTokenResponse,
    TaskRequest,
    TaskResponse,
    Usage,
)
from agent_server.errors import TurnError
from agent_server.forwarder import Forwarder
from agent_server.isolation import (
    IsolationError,
    cli_stage,
    default_cli_cache,
    uid_processes_kill,
)
from agent_server.metering import GrantMeter, budget_message
from agent_server.metering import Metered as MeteredSpend
from agent_server.runtimes.anthropic_api import AnthropicApiRuntime
from agent_server.runtimes.base import Clock, Runtime, Turn, TurnOutcome
from agent_server.runtimes.claude_code import ClaudeCodeRuntime
from agent_server.runtimes.codex_cli import CodexCliRuntime
from agent_server.runtimes.events import Emit, EventBounds
from agent_server.state import AgentState
from agent_server.streaming import streamed_turn
from trinity_contract.errors import ERROR_STATUS, ErrorCode
from trinity_contract.log_json import log_context
from trinity_contract.proof import BadNonce, health_proof
from trinity_contract.redaction import Redactor

logger = logging.getLogger("agent_server")

UNAUTHENTICATED_PATHS = frozenset({"/health"})


def utc_now() -> datetime:
    return datetime.now(UTC)


def cli_binary(config: AgentConfig) -> str | None:
    """The CLI binary a CLI runtime spawns (staged where the agent user can run it),
    None for the direct API runtime."""
    if config.runtime == "anthropic-api":
        return None
    binary = config.codex_bin if config.runtime == "codex-cli" else config.claude_bin
    if config.agent_user is not None:
        # The checkout may sit under a directory the agent user cannot enter.
        binary = cli_stage(binary, config.cli_cache or default_cli_cache())
    return binary


def build_runtime(
    config: AgentConfig, clock: Clock, *, binary: str | None, confinement: Confinement
) -> Runtime:
    if config.runtime == "anthropic-api" or binary is None:
        assert config.model is not None  # load_config requires it for this runtime
        return AnthropicApiRuntime(default_model=config.model, clock=clock)
    if config.runtime == "codex-cli":
        return CodexCliRuntime(
            binary=binary,
            clock=clock,
            # The server's own directory: out of the agent user's reach, kept across
            # restarts (which CLI thread each chat session resumes).
            threads_dir=config.home / "codex-threads",
            default_model=config.model,
            run_as=config.agent_user,
            sandbox=confinement.sandbox,
            contained=config.contained,
        )
    return ClaudeCodeRuntime(
        binary=binary,
        clock=clock,
        run_as=config.agent_user,
        allowed_tools=config.allowed_tools,
        sandbox=confinement.sandbox,
    )


def create_app(
    config: AgentConfig,
    *,
    runtime: Runtime | None = None,
    baseline: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
    clock: Clock = utc_now,
) -> FastAPI:
    """Build the app. `baseline` defaults to this process's environment, read now.

    Raises IsolationError when the containment the config asks for cannot be had."""
    redactor = redactor or Redactor()
    state = AgentState(
        config,
        baseline=dict(os.environ) if baseline is None else baseline,
        redactor=redactor,
    )
    binary = cli_binary(config)
    confinement = confinement_make(config, cli_binary=binary)
    if runtime is None:
        runtime = build_runtime(config, clock, binary=binary, confinement=confinement)
    server = _Server(config, state, runtime, redactor, confinement)
    _log_isolation(confinement)
    app = FastAPI(
        title="Trinity agent server", lifespan=server.lifespan, docs_url=None, redoc_url=None
    )
    app.state.agent = state
    app.state.runtime = server.runtime
    app.state.forwarder = server.forwarder
    app.state.confinement = confinement
    _add_guards(app, server)
    _add_routes(app, server)
    return app


def _log_isolation(confinement: Confinement) -> None:
    missing = "; ".join(confinement.missing) or "nothing"
    if confinement.isolation == "same-user":
        logger.warning(
            "isolation=same-user: the agent server is not root, so the CLI runs as this "
            "server's own user and could read its memory and files (weak mode; run it as "
            "root for a user of the agent's own and a sandbox). Missing: %s",
            missing,
        )
    elif confinement.isolation == "separate-user":
        assert confinement.user is not None
        logger.warning(
            "isolation=separate-user: the CLI runs as %s without a sandbox: its tools "
            "share this host's network and process table (every process of that user is "
            "killed once no turn runs). Missing: %s",
            confinement.user.name,
            missing,
        )
    else:
        assert confinement.user is not None
        logger.info(
            "isolation=sandbox: the CLI runs as %s in its own network, PID, IPC and mount "
            "namespaces, reaching only this server's forwarder. Missing: %s",
            confinement.user.name,
            missing,
        )


def _add_guards(app: FastAPI, server: _Server) -> None:
    """The bearer secret on every path but health, and invalid bodies answered safely."""
    config = server.config

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
            return server.error_response(
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
        return server.error_response(
            "invalid_request", problems or "invalid body", execution_id=None
        )


def _add_routes(app: FastAPI, server: _Server) -> None:
    config, state = server.config, server.state

    @app.get("/health", response_model=HealthResponse)
    async def health(nonce: str | None = None) -> Response:
        # Unauthenticated on purpose: the platform asks before it sends the secret,
        # and only a holder of the secret can answer the proof (trinity_contract/proof.py).
        proof = None
        if nonce is not None:
            try:
                proof = health_proof(secret=config.secret, nonce=nonce)
            except BadNonce as exc:
                return server.error_response("invalid_request", str(exc), execution_id=None)
        body = HealthResponse(
            runtime=config.runtime,
            model=config.model,
            busy=state.busy,
            proof=proof,
            isolation=server.confinement.isolation,
            isolation_missing=server.confinement.missing,
            egress_guard=config.egress_guard,
        )
        return JSONResponse(body.model_dump(mode="json"))

    @app.post("/api/task", response_model=TaskResponse)
    async def task(body: TaskRequest) -> Response:
        if body.stream:
            return server.stream_turn(body, session_id=None)
        return await server.run_turn(body, session_id=None)

    @app.post("/api/chat", response_model=ChatResponse)
    async def chat(body: ChatRequest) -> Response:
        if body.stream:
            return server.stream_turn(body, session_id=body.session_id)
        return await server.run_turn(body, session_id=body.session_id)

    @app.post("/api/turns/{execution_id}/cancel", response_model=CancelResponse)
    async def cancel(
        execution_id: Annotated[str, PathParam(min_length=1, max_length=200)],
    ) -> Response:
        cancelled = await server.cancels.cancel(execution_id)
        logger.info("turn %s: cancel asked (a running turn ended: %s)", execution_id, cancelled)
        answer = CancelResponse(execution_id=execution_id, cancelled=cancelled)
        return JSONResponse(answer.model_dump(mode="json"))

    @app.post("/api/credentials/reload-token", response_model=ReloadTokenResponse)
    async def reload_token(body: ReloadTokenRequest) -> Response:
        token = body.token.get_secret_value().strip()
        if not token:
            return server.error_response(
                "invalid_request", "token must not be empty", execution_id=None
            )
        shadow = state.reload_token(token, remove_api_key=body.remove_api_key)
        logger.info(
            "reload-token: next spawns use the new OAuth token (remove_api_key=%s, env_shadow=%s)",
            body.remove_api_key,
            shadow,
        )
        return JSONResponse(ReloadTokenResponse(env_shadow=shadow).model_dump(mode="json"))


class _Server:
    """What a turn needs: the config, the state, the runtime, the forwarder, the redactor."""

    def __init__(
        self,
        config: AgentConfig,
        state: AgentState,
        runtime: Runtime,
        redactor: Redactor,
        confinement: Confinement,
    ) -> None:
        self.config = config
        self.state = state
        self.runtime = runtime
        self.redactor = redactor
        self.confinement = confinement
        # A runtime that runs the agent's code in a child process (the CLI) gets the
        # turn's credential only as a forwarder capability; an in-process one (the
        # direct Messages API runtime, which runs no tools) gets the environment as is.
        self.via_forwarder = bool(getattr(runtime, "uses_forwarder", True))
        self.forwarder = Forwarder(
            upstream=config.upstream,
            codex_upstream=config.codex_upstream,
            openai_upstream=config.openai_upstream,
            redactor=redactor,
        )
        self.cancels = Cancellations()
        # The tasks of streamed turns, held while they run.
        self.streams: set[asyncio.Task[Any]] = set()

    @asynccontextmanager
    async def lifespan(self, _: FastAPI) -> AsyncIterator[None]:
        if self.via_forwarder:
            await self.forwarder.start(unix=self.confinement.forwarder_listen())
        try:
            yield
        finally:
            await self.runtime.aclose()
            self.reap()
            await self.forwarder.aclose()
            self.confinement.close()
            self.state.close()

    def reap(self) -> None:
        """Outside a sandbox, kill every process of the agent's user once no turn
        runs: nothing a turn started outlives it, whatever sessions it made.

        Blocking on purpose (a few ms): no other coroutine can start a spawn of that
        user while the kill runs. In the sandbox the PID namespace already did it.
        """
        user = self.confinement.user
        if self.confinement.isolation != "separate-user" or user is None:
            return
        try:
            uid_processes_kill(user)
        except (OSError, subprocess.SubprocessError, IsolationError) as exc:
            # The turn's answer stands; what it left running is this log line's to say.
            logger.error("could not kill the processes of %s after a turn: %s", user.name, exc)

    def error_response(
        self,
        code: ErrorCode,
        detail: str,
        *,
        execution_id: str | None,
        resets_at: datetime | None = None,
        limiting_window: str | None = None,
        headers: Mapping[str, str] | None = None,
        metered: MeteredSpend | None = None,
    ) -> JSONResponse:
        body = ErrorBody(
            error_code=code,
            detail=self.redactor.redact(detail),
            execution_id=execution_id,
            resets_at=resets_at,
            limiting_window=limiting_window,
            metered=_metered_body(metered),
        )
        return JSONResponse(
            body.model_dump(mode="json"), status_code=ERROR_STATUS[code], headers=headers
        )

    async def run_turn(
        self, body: TaskRequest, *, session_id: str | None, emit: Emit | None = None
    ) -> JSONResponse:
        """The turn's answer; its events go to `emit` as they happen, when given."""
        # Every line this turn logs carries the platform's execution id (LOG_FORMAT=json).
        with log_context(execution_id=body.execution_id):
            if self.cancels.is_cancelled(body.execution_id):
                logger.info("turn %s: already cancelled, not started", body.execution_id)
                return self.error_response(
                    "cancelled",
                    f"the turn {body.execution_id} was cancelled before it started",
                    execution_id=body.execution_id,
                    headers=_override_headers(body),
                )
            return await self._run_turn(body, session_id=session_id, emit=emit)

    def stream_turn(self, body: TaskRequest, *, session_id: str | None) -> Response:
        """The turn answered as the NDJSON stream (agent_server/streaming.py)."""
        return streamed_turn(
            lambda emit: self.run_turn(body, session_id=session_id, emit=emit),
            execution_id=body.execution_id,
            headers=_override_headers(body),
            keep=self.streams,
        )

    async def spend(
        self, spawn: Turn, env: dict[str, str], override: AppliedOverride | None = None
    ) -> tuple[TurnOutcome, dict[str, str] | None]:
        """Run the spawn; through the forwarder, the CLI holds a capability in place of
        the credential, alive exactly as long as this spawn, and every answer on it is
        metered. Returns the outcome (its `metered` spend set) and the rate-limit
        headers the forwarder relayed (None when it saw none). A TurnError carries the
        metered spend too; one after the key's budget refused a request is `billing`.
        """
        runtime, forwarder, scheme = self.runtime, self.forwarder, self.state.scheme
        if not self.via_forwarder:
            return await runtime.run(spawn, env), None
        credential = scheme.turn_credential(env)
        if credential is None:
            cli_env = scheme.capability_env(env, None, None, forwarder.base_url)
            return await runtime.run(spawn, cli_env), None
        # The platform sends a budget with the key only, and only the key it sent
        # is capped by it (a shadowing .env key is the agent's own).
        budget = override if override is not None and override.secret == credential.secret else None
        with forwarder.grant(
            shape=credential.shape,
            secret=credential.secret,
            account_id=credential.account_id,
            budget_usd=budget.budget_usd if budget is not None else None,
            budget_name=budget.budget_name if budget is not None else None,
        ) as grant:
            cli_env = scheme.capability_env(
                env, grant.capability, credential.env_name, forwarder.base_url
            )
            try:
                # The runtime reads what the forwarder saw (never the credential) to
                # classify a refusal from the provider's own answer.
                outcome = await runtime.run(replace(spawn, upstream=grant.seen), cli_env)
            except TurnError as exc:
                raise _metered_error(exc, grant.meter) from None
            except asyncio.CancelledError:
                self.cancels.spent(spawn.execution_id, grant.meter.summary())
                raise
        return _metered_outcome(outcome, grant.meter.summary()), grant.ratelimit or None

    def _timeout(self, body: TaskRequest) -> float:
        timeout = body.timeout_seconds
        if self.config.timeout_max is not None:
            timeout = min(timeout, self.config.timeout_max)
        return timeout

    async def _run_turn(
        self, body: TaskRequest, *, session_id: str | None, emit: Emit | None
    ) -> JSONResponse:
        override = body.auth_override.applied() if body.auth_override else None
        headers = _override_headers(body)
        timeout = self._timeout(body)
        logger.info(
            "turn %s: start runtime=%s model=%s session=%s override=%s timeout=%gs",
            body.execution_id,
            self.runtime.name,
            body.model or self.config.model or "(runtime default)",
            session_id or "-",
            override.kind if override else "-",
            timeout,
        )
        try:
            outcome, ratelimit = await self.cancels.run(
                body.execution_id, self._spawn(body, override, session_id, timeout, emit)
            )
        except TurnError as exc:
            logger.warning(
                "turn %s: %s (%s)",
                body.execution_id,
                exc.error_code,
                self.redactor.redact(exc.detail),
            )
            return self.error_response(
                exc.error_code,
                exc.detail,
                execution_id=body.execution_id,
                resets_at=exc.resets_at,
                limiting_window=exc.limiting_window,
                headers=headers,
                metered=exc.metered,
            )
        except Exception as exc:
            logger.exception("turn %s: internal error", body.execution_id)
            return self.error_response(
                "container_fault",
                f"internal error in the agent server: {type(exc).__name__}",
                execution_id=body.execution_id,
                headers=headers,
            )
        logger.info(
            "turn %s: ok model=%s tokens=%s/%s",
            body.execution_id,
            outcome.model,
            outcome.input_tokens,
            outcome.output_tokens,
        )
        return self.served_response(
            body, outcome, ratelimit, session_id=session_id, headers=headers
        )

    async def _spawn(
        self,
        body: TaskRequest,
        override: AppliedOverride | None,
        session_id: str | None,
        timeout: float,
        emit: Emit | None = None,
    ) -> tuple[TurnOutcome, dict[str, str] | None]:
        """One spawn in its own home, after the session's earlier turn; the home of a
        turn without a session is discarded after it. Its events, bounded and
        redacted, go to `emit` when given."""
        state = self.state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        lock = state.session_lock(session_id) if session_id is not None else None
        state.busy += 1
        home = None
        try:
            if lock is not None:
                await _session_acquire(lock, session_id=session_id, timeout=timeout)
            try:
                home = state.new_spawn_home(session_id)
                env = state.spawn_env(override, home)
                spawn = Turn(
                    execution_id=body.execution_id,
                    message=body.message,
                    model=body.model or self.config.model,
                    timeout_seconds=max(deadline - loop.time(), 0.001),
                    home=home,
                    cwd=state.area.workdir,
                    session_id=session_id,
                    events=EventBounds(redactor=self.redactor, emit=emit) if emit else None,
                )
                return await self.spend(spawn, env, override)
            finally:
                if lock is not None:
                    lock.release()
        finally:
            state.busy -= 1
            if state.busy == 0:
                self.reap()
            if home is not None and session_id is None:
                state.discard_spawn_home(home)

    def served_response(
        self,
        body: TaskRequest,
        outcome: TurnOutcome,
        ratelimit: dict[str, str] | None,
        *,
        session_id: str | None,
        headers: Mapping[str, str],
    ) -> JSONResponse:
        payload = TaskResponse(
            execution_id=body.execution_id,
            # An answer can quote the environment (the agent's tools can read it).
            response=self.redactor.redact(outcome.response),
            model=outcome.model,
            usage=_usage(outcome),
            cost_usd=outcome.cost_usd,
            upstream_ratelimit=ratelimit,
            metered=_metered_body(outcome.metered),
        )
        if session_id is not None:
            payload = ChatResponse(**payload.model_dump(), session_id=session_id)
        answer = payload.model_dump(mode="json")
        for optional in ("upstream_ratelimit", "metered"):
            if answer.get(optional) is None:
                answer.pop(optional, None)  # optional: absent, not null
        return JSONResponse(answer, headers=headers)


def _override_headers(body: TaskRequest) -> dict[str, str]:
    """The header naming the override a turn runs on (none without one)."""
    override = body.auth_override.applied() if body.auth_override else None
    return {AUTH_OVERRIDE_HEADER: override.kind} if override else {}


async def _session_acquire(lock: asyncio.Lock, *, session_id: str | None, timeout: float) -> None:
    """Wait for the session's earlier turn; raises TurnError("timeout") after `timeout`."""
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can time out after the inner
        # acquire succeeded, leaking the lock forever.
        async with asyncio.timeout(timeout):
            await lock.acquire()
    except TimeoutError:
        raise TurnError(
            "timeout",
            f"session {session_id} was busy with an earlier turn for the whole "
            f"timeout_seconds={timeout:g}",
        ) from None


def _metered_outcome(outcome: TurnOutcome, metered: MeteredSpend) -> TurnOutcome:
    """The outcome with the metered spend as its usage and cost. Only when some answer
    could not be read is the CLI's own report kept, if it says more."""
    cost = metered.cost_usd
    if metered.unmetered and outcome.cost_usd is not None:
        cost = max(cost, outcome.cost_usd)
    return replace(
        outcome,
        input_tokens=metered.usage.input_tokens,
        output_tokens=metered.usage.output_tokens,
        cost_usd=cost,
        metered=metered,
    )


def _metered_error(exc: TurnError, meter: GrantMeter) -> TurnError:
    """The turn's error with what its requests spent. Once the key's budget refused a
    request the turn failed for that (the CLI's own words follow): `billing`, never
    the provider rate limit the CLI may report the forwarder's 429 as."""
    metered = meter.summary()
    if metered.budget_refused:
        error = TurnError(
            "billing", f"{budget_message(meter)} (The CLI then stopped: {exc.detail[:300]})"
        )
    else:
        error = exc
    error.metered = metered
    return error


def _usage(outcome: TurnOutcome) -> Usage:
    metered = outcome.metered
    return Usage(
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
        cache_creation_input_tokens=metered.usage.cache_creation_input_tokens if metered else 0,
        cache_read_input_tokens=metered.usage.cache_read_input_tokens if metered else 0,
    )


def _metered_body(metered: MeteredSpend | None) -> Metered | None:
    """The contract's shape of a metered spend (rounded: a float sum's last digits
    are noise)."""
    if metered is None:
        return None
    return Metered(
        requests=metered.requests,
        cost_usd=round(metered.cost_usd, 8),
        by_model={
            model: ModelSpend(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cost_usd=round(cost, 8),
            )
            for model, (usage, cost) in metered.by_model.items()
        },
        budget_usd=metered.budget_usd,
        budget_refused=metered.budget_refused,
        unmetered=metered.unmetered,
    )
