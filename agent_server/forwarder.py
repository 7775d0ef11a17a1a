"""The credential-injecting forwarder: the CLI spends a turn's credential, never reads it.

It runs in the agent server process on a listener of its own, bound by
`Forwarder.start` from the app's lifespan: 127.0.0.1, port 0, or, when the CLI runs
in the sandbox (`agent_server/sandbox.py`), a Unix socket only the agent's user can
connect to, bound into the sandbox, and no TCP port at all. Per turn the server
registers a `Grant`: an opaque capability (`trinity-cap-...`) mapped to the real
credential the turn runs on. The CLI is pointed here (`ANTHROPIC_BASE_URL` for the
Claude Code CLI, its config.toml's provider for the Codex CLI) with the capability
where the secret would be; the forwarder

- finds the grant by the capability the request presents (`Authorization: Bearer`
  or `x-api-key`), compared in constant time; no grant: 401, nothing goes upstream;
- forwards only the paths the grant's provider serves (query kept): an Anthropic
  grant `POST /v1/messages` and `POST /v1/messages/count_tokens`, a Codex grant
  `POST /v1/responses`; anything else: 403, logged;
- replaces the capability with the real credential in the grant's shape: Bearer or
  `x-api-key` to the Anthropic upstream; a Codex plan's access token (Bearer) and
  `chatgpt-account-id` to `{codex}/backend-api/codex/responses`; an OpenAI key
  (Bearer) to `{openai}/v1/responses`;
- streams the answer back as it arrives (one pooled `httpx.AsyncClient`), keeps the
  rate-limit headers of every answer (`anthropic-ratelimit-unified-*`, `x-codex-*`)
  on the grant, so the turn's answer can carry a fresh headroom reading to the
  platform, and keeps the status and a bounded, redacted excerpt of an error answer
  (`agent_server/upstream.py`), so the runtime classifies a refusal exactly;
- meters every served answer's usage on the grant as it relays it
  (`agent_server/metering.py`: the turn's spend), and refuses a key grant's billed
  requests once that spend reaches the budget the platform sent with the key: 429 in
  the provider's shape, nothing upstream.

A grant lives exactly as long as its turn (`Forwarder.grant` is a context manager):
a capability copied out of a finished turn is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import httpx
import uvicorn

from agent_server.config import DEFAULT_CODEX_UPSTREAM, DEFAULT_OPENAI_UPSTREAM
from agent_server.metering import GrantMeter, budget_message, provider_of_shape
from agent_server.relay import (
    REQUEST_DROPPED,
    RESPONSE_DROPPED,
    BodyTooLarge,
    ClientGone,
    answer_json,
    body_chunks,
    content_length,
    presented,
    relay,
)
from agent_server.upstream import (
    MAX_REFUSAL_BYTES,
    UpstreamSeen,
    parse_refusal,
    ratelimit_headers,
)
from trinity_contract.redaction import Redactor, mask

logger = logging.getLogger("agent_server.forwarder")

CAPABILITY_PREFIX: Final = "trinity-cap-"
ANTHROPIC_PATHS: Final = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
RESPONSES_PATHS: Final = frozenset({"/v1/responses"})
ALLOWED_PATHS: Final = ANTHROPIC_PATHS | RESPONSES_PATHS
# The paths whose served answers are billed (a token count costs nothing).
BILLED_PATHS: Final = frozenset({"/v1/messages", "/v1/responses"})
CODEX_RESPONSES_PATH: Final = "/backend-api/codex/responses"
# The Messages API's own request limit: a larger body is refused here, so agent code
# cannot make the server hold an unbounded request in memory.
MAX_REQUEST_BYTES: Final = 32 * 1024 * 1024
# How the grant's credential goes upstream, and so which CLI variable carries the
# capability (the Claude CLI sends `x-api-key` for ANTHROPIC_API_KEY, a Bearer
# otherwise; the Codex CLI always sends its provider key as a Bearer).
HeaderShape = Literal["bearer", "x-api-key", "codex-plan", "openai-key"]
CODEX_SHAPES: Final = frozenset({"codex-plan", "openai-key"})

# The CLI streams: the whole answer may take minutes; only a silent connection fails.
_UPSTREAM_TIMEOUT: Final = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0)
_POOL: Final = httpx.Limits(max_connections=64, max_keepalive_connections=16)


@dataclass
class Grant:
    """One turn's right to spend one credential through the forwarder.

    `seen` is what the forwarder saw of the answers relayed on this grant (no
    credential in it: the runtime may read it): the rate-limit headers of the latest
    one (lower-case names, empty until one arrives) and the latest refusal.
    `account_id` is a Codex plan's ChatGPT account (sent as `chatgpt-account-id`).
    `meter` sums the usage of every served answer (`agent_server/metering.py`) and
    holds a key grant's budget: once its metered cost reaches it, billed requests are
    refused here.
    """

    capability: str = field(repr=False)
    shape: HeaderShape
    secret: str = field(repr=False)
    account_id: str | None = field(default=None, repr=False)
    seen: UpstreamSeen = field(default_factory=UpstreamSeen)
    meter: GrantMeter = field(default_factory=lambda: GrantMeter("anthropic"))

    @property
    def ratelimit(self) -> dict[str, str]:
        return self.seen.ratelimit

    @property
    def requests(self) -> int:
        return self.seen.requests

    @property
    def paths(self) -> frozenset[str]:
        """The provider paths this grant may spend its credential on."""
        return RESPONSES_PATHS if self.shape in CODEX_SHAPES else ANTHROPIC_PATHS


def utc_now() -> datetime:
    return datetime.now(UTC)


def _digest(capability: str) -> bytes:
    return hashlib.sha256(capability.encode("utf-8", "surrogateescape")).digest()


class Forwarder:
    """The forwarder of one agent server. `start`/`aclose` run on the server's loop."""

    def __init__(
        self,
        *,
        upstream: str,
        redactor: Redactor,
        codex_upstream: str = DEFAULT_CODEX_UPSTREAM,
        openai_upstream: str = DEFAULT_OPENAI_UPSTREAM,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.codex_upstream = codex_upstream.rstrip("/")
        self.openai_upstream = openai_upstream.rstrip("/")
        self.redactor = redactor
        self.clock = clock
        # Keyed by the capability's SHA-256: the lookup's timing depends on a digest
        # the caller cannot steer, and the final comparison is constant-time.
        self._grants: dict[bytes, Grant] = {}
        self._client: httpx.AsyncClient | None = None
        self._server: _EmbeddedServer | None = None
        self._serving: Any = None
        self.base_url = ""

    # --- grants -----------------------------------------------------------------

    @contextlib.contextmanager
    def grant(
        self,
        *,
        shape: HeaderShape,
        secret: str,
        account_id: str | None = None,
        budget_usd: float | None = None,
        budget_name: str | None = None,
    ) -> Iterator[Grant]:
        """Register a fresh capability for `secret` for the duration of the block.

        `budget_usd` (a key grant's remaining budget; None: no cap) closes the grant
        to billed requests once its metered spend reaches it; `budget_name` words it.
        """
        capability = CAPABILITY_PREFIX + secrets.token_urlsafe(32)
        meter = GrantMeter(provider_of_shape(shape), budget_usd=budget_usd, budget_name=budget_name)
        grant = Grant(
            capability=capability, shape=shape, secret=secret, account_id=account_id, meter=meter
        )
        key = _digest(capability)
        self._grants[key] = grant
        try:
            yield grant
        finally:
            self._grants.pop(key, None)

    def find(self, presented: str) -> Grant | None:
        """The live grant `presented` names, or None."""
        if not presented.startswith(CAPABILITY_PREFIX):
            return None
        grant = self._grants.get(_digest(presented))
        if grant is None or not hmac.compare_digest(grant.capability, presented):
            return None
        return grant

    @property
    def live_grants(self) -> int:
        return len(self._grants)

    # --- the listener -----------------------------------------------------------

    async def start(self, *, unix: UnixListen | None = None) -> str:
        """Start serving; return the base URL the CLI is given.

        Without `unix`: on 127.0.0.1:0. With it (the sandbox): on that Unix socket
        only, owned by the agent's user, 0600, and no TCP listener at all; the CLI
        reaches it through the sandbox's relay at `unix.cli_url`.
        """
        self._client = httpx.AsyncClient(timeout=_UPSTREAM_TIMEOUT, limits=_POOL, trust_env=False)
        if unix is None:
            sock = _tcp_listener()
            base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        else:
            sock = unix.listen()
            base_url = unix.cli_url
        config = uvicorn.Config(
            self,
            lifespan="off",
            # No log settings of its own: uvicorn applies them to its global loggers,
            # and `access_log=False` would silence the agent server's access lines too.
            log_config=None,
            timeout_keep_alive=75,
            timeout_graceful_shutdown=1,
            # The parser it was measured with (bench/forwarder.py): not "auto", which
            # would pick httptools now that the gateway installs it.
            http="h11",
        )
        self._server = _EmbeddedServer(config)
        self._serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._serving.done():
                self._serving.result()  # raises what stopped it
                raise RuntimeError("the forwarder stopped before it listened")
            await asyncio.sleep(0.005)  # startup is a few event-loop turns
        self.base_url = base_url
        where = f"unix:{unix.path} (the CLI's {base_url})" if unix is not None else base_url
        logger.info("forwarder listening on %s, upstream %s", where, self.upstream)
        return self.base_url

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._serving
        if self._client is not None:
            await self._client.aclose()
        self._grants.clear()

    # --- ASGI ---------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        grant = await self._admit(scope, send)
        if grant is None:
            return
        billed = scope["path"] in BILLED_PATHS
        async with grant.meter.slot() if billed else contextlib.nullcontext():
            # Checked (again) once a slot is held: the requests it waited for spent too.
            if billed and not grant.meter.admits():
                await _refuse_over_budget(send, grant)
                return
            response = await self._open_upstream(scope, receive, send, grant)
            if response is None:
                return
            try:
                await self._answer_upstream(response, send, grant, billed=billed)
            except httpx.HTTPError as exc:
                # Headers already went out: all that is left is to cut the stream,
                # which the CLI reports as a broken connection.
                logger.warning("forwarder: upstream stream broke: %s", type(exc).__name__)
            finally:
                await response.aclose()

    async def _answer_upstream(
        self, response: httpx.Response, send: Any, grant: Grant, *, billed: bool
    ) -> None:
        """Relay one upstream answer: its rate-limit headers kept on the grant, a
        served one's usage metered, a refusal's excerpt kept for the classifier."""
        limits = ratelimit_headers(response.headers)
        if limits:
            grant.seen.ratelimit = limits
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [
                    (name, value)
                    for name, value in response.headers.raw
                    if name.decode().lower() not in RESPONSE_DROPPED
                ],
            }
        )
        refused = response.status_code >= 400
        # Only a served answer is billed; a refusal or a token count costs nothing.
        meter = (
            grant.meter.request(headers=response.headers)
            if billed and response.status_code < 300
            else None
        )
        kept = await relay(response, send, keep=MAX_REFUSAL_BYTES if refused else 0, meter=meter)
        # The latest answer decides: a refusal the CLI's retry got past is no
        # reason the turn failed.
        grant.seen.refusal = (
            parse_refusal(
                status=response.status_code,
                body=kept,
                headers=response.headers,
                received_at=self.clock(),
                redact=lambda text: _redact(self.redactor, text, grant.secret),
            )
            if refused
            else None
        )

    async def _admit(self, scope: dict[str, Any], send: Any) -> Grant | None:
        """The live grant this request may spend, or None once it was refused (403 off
        the allowlist, 401 without a live capability, 413 past the size limit)."""
        method: str = scope["method"]
        path: str = scope["path"]
        if method != "POST" or path not in ALLOWED_PATHS:
            logger.warning(
                "forwarder: refused %s %s (not a provider path the runtime needs)",
                method,
                self.redactor.redact(path[:200]),
            )
            await _answer(send, 403, "permission_error", "path not allowed by the forwarder")
            return None
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        grant = self.find(presented(headers))
        if grant is None:
            logger.warning("forwarder: refused %s %s (no live capability)", method, path)
            await _answer(send, 401, "authentication_error", "invalid or expired capability")
            return None
        if path not in grant.paths:
            # A Claude grant never reaches the Responses API, nor a Codex one Messages.
            logger.warning(
                "forwarder: refused %s %s (not a path of the grant's provider, %s)",
                method,
                path,
                grant.shape,
            )
            await _answer(send, 403, "permission_error", "path not allowed for this credential")
            return None
        declared = content_length(headers)
        if declared is not None and declared > MAX_REQUEST_BYTES:
            logger.warning("forwarder: refused a request body over %d bytes", MAX_REQUEST_BYTES)
            await _answer(send, 413, "request_too_large", "request body too large")
            return None
        return grant

    async def _open_upstream(
        self, scope: dict[str, Any], receive: Any, send: Any, grant: Grant
    ) -> httpx.Response | None:
        """Send the request upstream with the grant's credential in place of the
        capability; the streaming response, or None once an error was answered."""
        upstream_headers = [
            (name, value)
            for name, value in scope["headers"]
            if name.decode().lower() not in REQUEST_DROPPED
        ]
        upstream_headers += _credential_headers(grant)
        upstream_headers.append((b"accept-encoding", b"identity"))
        url = self._upstream_url(grant, scope["path"])
        query: bytes = scope.get("query_string", b"")
        if query:
            url += "?" + query.decode("latin-1")
        assert self._client is not None
        grant.seen.requests += 1
        try:
            # The body streams on as it arrives (its content-length kept), so the
            # upstream reads a large prompt while the rest is still coming in.
            return await self._client.send(
                self._client.build_request(
                    "POST",
                    url,
                    headers=upstream_headers,
                    content=body_chunks(receive, MAX_REQUEST_BYTES),
                ),
                stream=True,
            )
        except BodyTooLarge:
            logger.warning("forwarder: refused a request body over %d bytes", MAX_REQUEST_BYTES)
            await _answer(send, 413, "request_too_large", "request body too large")
        except ClientGone:
            pass
        except httpx.HTTPError as exc:
            logger.warning("forwarder: upstream unreachable: %s", type(exc).__name__)
            await _answer(send, 502, "api_error", "the forwarder could not reach the upstream")
        return None

    def _upstream_url(self, grant: Grant, path: str) -> str:
        """Where the grant's credential is spent: a plan's token goes to the ChatGPT
        backend's Codex path, a key to the platform API, a Claude credential to the
        Anthropic upstream (the path as the CLI sent it)."""
        if grant.shape == "codex-plan":
            return self.codex_upstream + CODEX_RESPONSES_PATH
        if grant.shape == "openai-key":
            return self.openai_upstream + path
        return self.upstream + path


@dataclass(frozen=True)
class UnixListen:
    """Where a sandboxed server's forwarder listens: a Unix socket that only the
    agent's user (`uid`, `gid`) and root may connect to, in a directory of root's."""

    path: Path
    uid: int
    gid: int
    cli_url: str

    def listen(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.path))
        os.chown(self.path, self.uid, self.gid)
        os.chmod(self.path, 0o600)
        sock.listen(128)
        return sock


def _tcp_listener() -> socket.socket:
    # IPPROTO_TCP named, and TCP_NODELAY on the listener (accepted sockets inherit
    # it): asyncio sets NODELAY only on sockets whose proto says TCP, and without
    # it the first SSE chunk after the headers waited ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def _redact(redactor: Redactor, text: str, secret: str) -> str:
    """The server's redaction, and the grant's own secret whether registered or not
    (an upstream may quote the credential it refused)."""
    return redactor.redact(text).replace(secret, mask(secret))


def _credential_headers(grant: Grant) -> list[tuple[bytes, bytes]]:
    if grant.shape == "x-api-key":
        return [(b"x-api-key", grant.secret.encode())]
    headers = [(b"authorization", f"Bearer {grant.secret}".encode())]
    if grant.shape == "codex-plan" and grant.account_id:
        headers.append((b"chatgpt-account-id", grant.account_id.encode()))
    return headers


async def _answer(send: Any, status: int, kind: str, message: str) -> None:
    """An error in the Messages API's shape, so the CLI reports it as it would upstream's."""
    await answer_json(send, status, {"type": "error", "error": {"type": kind, "message": message}})


async def _refuse_over_budget(send: Any, grant: Grant) -> None:
    """429 in the provider's shape, worded for the person reading the CLI: the key's
    budget is reached. Nothing went upstream, so it is no provider quota refusal."""
    meter = grant.meter
    meter.refused += 1
    logger.warning(
        "forwarder: refused a request over the key's budget (spent $%.4f of $%.4f)",
        meter.cost_usd,
        meter.budget_usd or 0.0,
    )
    message = budget_message(meter)
    body: dict[str, Any]
    if grant.shape in CODEX_SHAPES:
        # The code the Codex CLI shows without retrying.
        body = {
            "error": {
                "message": message,
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        }
    else:
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": message}}
    # x-should-retry: false, so the CLI's SDK shows it at once instead of retrying.
    await answer_json(send, 429, body, extra=[(b"x-should-retry", b"false")])


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that shares the agent server's process and event loop.

    It must not take the process's signals: the agent server's own uvicorn handles
    SIGTERM/SIGINT and stops this one from its lifespan.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
