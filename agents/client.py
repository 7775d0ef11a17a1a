"""The one module that talks to agent servers (httpx, timeouts, the shared secret).

The wire format is the JSON contract documented in docs/flows/agent-server.md and
pinned by tests on both sides; this module does not import agent_server. The health
proof both sides compute is the shared, standard-library-only
``trinity_contract/proof.py``.

Endpoints are ``http://host:port`` (docker) or ``unix:///abs/path.sock`` (the local
runtime). Nothing secret goes to an endpoint before it proved, for a nonce chosen
here, that it holds the agent's secret (``prove``); the proof is remembered per
process for the (endpoint, process handle) pair, so a served turn pays no extra round
trip, and forgotten on any transport error to that endpoint.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx
from django.utils.dateparse import parse_datetime

from routing.rung import Rung
from trinity.crypto import Secret
from trinity.http import ProcessClient
from trinity_contract.proof import new_nonce, proof_matches
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

AUTH_OVERRIDE_HEADER = "X-Trinity-Auth-Override"
CONNECT_TIMEOUT = 5.0
CONTROL_TIMEOUT = 15.0
# A cancel is a kill: the agent server answers at once, or the flag and the deadline
# stop the turn instead.
CANCEL_TIMEOUT = 5.0
NDJSON = "application/x-ndjson"
# A streamed answer's lines: an event is small (the agent server bounds it), the last
# line carries the whole answer. A longer line is off contract.
EVENT_LINE_MAX = 64 * 1024
RESULT_LINE_MAX = 32 * 1024 * 1024
# A turn's HTTP call waits for the runtime's own timeout plus this margin, so the
# agent server answers 504 itself instead of the client cutting the line first.
TURN_TIMEOUT_MARGIN = 30.0
# Agent servers live on loopback or the compose network; a web process serving many
# concurrent turns keeps at most this many connections open.
# An idle connection is dropped well before the agent server drops it
# (agent_server/__main__.py SERVER_KEEPALIVE_SECONDS, 75 s): whichever side closes
# first must be this one, or a turn sent on a connection the server is closing fails
# without ever reaching it (and cannot be re-sent blind: it might have been read).
KEEPALIVE_SECONDS = 25.0
POOL_LIMITS = httpx.Limits(
    max_connections=256, max_keepalive_connections=64, keepalive_expiry=KEEPALIVE_SECONDS
)

UNIX_SCHEME = "unix://"
# The Host header of a request over a Unix socket (the socket, not the name, routes it).
UNIX_BASE_URL = "http://agent-server"

# The one pooled client of this process for TCP endpoints: no client, TLS context or
# connection per turn.
_http = ProcessClient(lambda: httpx.Client(limits=POOL_LIMITS, trust_env=False))


class _SocketClients:
    """One pooled client per Unix socket path, per process (a forked child builds its
    own: a pool shared across a fork would share its connections with the parent)."""

    def __init__(self) -> None:
        self._pid = 0
        self._clients: dict[str, httpx.Client] = {}
        self._lock = threading.Lock()

    def get(self, path: str) -> httpx.Client:
        pid = os.getpid()
        if self._pid == pid and (client := self._clients.get(path)) is not None:
            return client
        with self._lock:
            if self._pid != pid:
                self._pid, self._clients = pid, {}
            client = self._clients.get(path)
            if client is None:
                transport = httpx.HTTPTransport(uds=path, limits=POOL_LIMITS)
                client = httpx.Client(transport=transport, trust_env=False)
                self._clients[path] = client
            return client


_sockets = _SocketClients()

# (endpoint, process handle) pairs whose server proved it holds the agent's secret, in
# this process. A set's add and discard are atomic; a race costs one more proof.
_verified: set[tuple[str, str]] = set()


MICRO_USD = Decimal("0.000001")


@dataclass(frozen=True)
class MeteredSpend:
    """What the agent server metered on the attempt's credential (its forwarder's sum
    of every served answer's usage, priced): the attempt's spend, served or not."""

    requests: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    # Requests refused because the key's budget for the turn was reached.
    budget_refused: int = 0

    @property
    def cost(self) -> Decimal:
        """``cost_usd`` as the ledgers and the execution row keep it (to the micro-dollar)."""
        return Decimal(str(self.cost_usd)).quantize(MICRO_USD)


@dataclass(frozen=True)
class TurnOutcome:
    """What the agent server answered for one turn attempt."""

    status_code: int
    ok: bool
    response: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    error_code: str = ""
    detail: str = ""
    resets_at: datetime | None = None
    # The window the provider said limited a rate-limit refusal (its representative
    # claim), when the runtime saw it; "" otherwise.
    limiting_window: str = ""
    override_echo: str | None = None
    # A served turn's `upstream_ratelimit`: the provider's unified rate-limit headers
    # of the last answer the agent server's forwarder relayed (empty: none came).
    upstream_ratelimit: dict[str, str] = field(default_factory=dict)
    # The metered spend, when the agent server reports one (None: it predates
    # metering, and ``cost_usd`` is the CLI's own report).
    metered: MeteredSpend | None = None


class AgentServerUnavailable(Exception):
    """The agent server could not be reached or answered outside the contract."""


class AgentServerNotConnected(AgentServerUnavailable):
    """Nothing took the connection (refused, no route, connect timeout): the request
    never left this process, so sending it again after a restart is safe."""


class EndpointUnproven(AgentServerUnavailable):
    """Something answered on the endpoint without proving it holds the agent's secret:
    it is not this agent's server, and nothing was sent to it."""


class AgentServerClient:
    def __init__(self, *, endpoint: str, secret: Secret, handle: str) -> None:
        """``handle`` is the process handle (pid, container id) recorded with the
        endpoint: a proof holds for that server only, not for whatever serves on the
        endpoint after it."""
        if not endpoint:
            raise AgentServerUnavailable("the agent has no endpoint (is it started?)")
        self.endpoint = endpoint.rstrip("/")
        self._secret = secret
        self._key = (self.endpoint, handle)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secret.reveal()}"}

    def _send(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        client, base = self._client()
        try:
            return client.request(
                method,
                f"{base}{path}",
                json=json,
                params=params,
                headers=headers,
                timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            )
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, path) from None

    def _client(self) -> tuple[httpx.Client, str]:
        if self.endpoint.startswith(UNIX_SCHEME):
            return _sockets.get(self.endpoint[len(UNIX_SCHEME) :]), UNIX_BASE_URL
        return _http.get(), self.endpoint

    def _transport_error(self, exc: httpx.HTTPError, path: str) -> AgentServerUnavailable:
        # Whatever answers there next must prove itself again (a server that died
        # leaves its endpoint to whoever binds it first).
        _verified.discard(self._key)
        # httpx messages carry the URL only; redact anyway, a proxy may echo more.
        error = (
            AgentServerNotConnected
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
            else AgentServerUnavailable
        )
        return error(redact(f"{type(exc).__name__} talking to {self.endpoint}{path}: {exc}"))

    def _request(
        self, method: str, path: str, *, json: dict[str, Any] | None = None, timeout: float
    ) -> httpx.Response:
        """Send with the bearer secret, once the endpoint has proven itself."""
        if self._key not in _verified:
            self.prove()
        return self._send(method, path, json=json, headers=self._headers(), timeout=timeout)

    def prove(self, *, timeout: float = CONTROL_TIMEOUT) -> dict[str, Any]:
        """``GET /health?nonce=...`` (no secret sent) and check the answer's proof.

        Returns the health body (without the proof) and remembers the endpoint as
        verified. Raises AgentServerUnavailable when nothing answers, EndpointUnproven
        (naming the endpoint) when something answers without the right proof.
        """
        nonce = new_nonce()
        response = self._send("GET", "/health", params={"nonce": nonce}, timeout=timeout)
        try:
            data = response.json()
        except ValueError:
            data = None
        if (
            response.status_code != 200
            or not isinstance(data, dict)
            or not proof_matches(secret=self._secret.reveal(), nonce=nonce, proof=data.get("proof"))
        ):
            _verified.discard(self._key)
            raise EndpointUnproven(
                f"the endpoint {self.endpoint} did not prove it holds the agent's secret "
                f"(its /health answered {response.status_code} without a valid proof); "
                "nothing was sent to it"
            )
        _verified.add(self._key)
        data.pop("proof", None)
        return data

    def health(self) -> dict[str, Any]:
        """The server's /health, proven afresh; raises AgentServerUnavailable."""
        return self.prove()

    def run_turn(
        self,
        *,
        execution_id: str,
        message: str,
        timeout_seconds: float,
        model: str | None = None,
        rung: Rung | None = None,
        session_id: str | None = None,
        budget_usd: Decimal | None = None,
        budget_name: str | None = None,
        on_event: Callable[[object], None] | None = None,
    ) -> TurnOutcome:
        """POST /api/task (or /api/chat with a session id) and parse the typed answer.

        ``rung`` travels as the turn's ``auth_override``: the agent server applies it
        to this one spawn and echoes its kind. A key rung carries ``budget_usd``, the
        key's tightest remaining budget for this turn (named ``budget_name``), which
        its forwarder refuses to spend past. With ``on_event`` the turn is streamed:
        each event the agent server passes on as it happens goes to it, and the answer
        is the stream's last line (``turn_stream_read``).
        """
        body: dict[str, Any] = {
            "execution_id": execution_id,
            "message": message,
            "timeout_seconds": timeout_seconds,
        }
        if model:
            body["model"] = model
        if rung is not None:
            override: dict[str, Any] = rung.wire()
            if budget_usd is not None and "api_key" in override:
                override["budget_usd"] = float(max(budget_usd, Decimal(0)))
                if budget_name:
                    override["budget_name"] = budget_name[:200]
            body["auth_override"] = override
        path = "/api/task"
        if session_id:
            body["session_id"] = session_id
            path = "/api/chat"
        timeout = timeout_seconds + TURN_TIMEOUT_MARGIN
        if on_event is not None:
            body["stream"] = True
            return self._streamed(path, body, timeout=timeout, on_event=on_event)
        response = self._request("POST", path, json=body, timeout=timeout)
        return parse_turn_response(response)

    def _streamed(
        self,
        path: str,
        body: dict[str, Any],
        *,
        timeout: float,
        on_event: Callable[[object], None],
    ) -> TurnOutcome:
        if self._key not in _verified:
            self.prove()
        client, base = self._client()
        try:
            with client.stream(
                "POST",
                f"{base}{path}",
                json=body,
                headers=self._headers(),
                timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            ) as response:
                if not response.headers.get("content-type", "").startswith(NDJSON):
                    response.read()  # a refusal before the turn began: plain JSON
                    return parse_turn_response(response)
                echo = response.headers.get(AUTH_OVERRIDE_HEADER)
                return turn_stream_read(_lines(response.iter_bytes()), echo, on_event)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, path) from None

    def cancel_turn(self, *, execution_id: str) -> bool:
        """POST /api/turns/{id}/cancel: the agent server kills the turn's CLI and
        everything it started, and refuses any later attempt of it. True when a running
        spawn was killed; raises AgentServerUnavailable."""
        response = self._request(
            "POST", f"/api/turns/{execution_id}/cancel", timeout=CANCEL_TIMEOUT
        )
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code != 200 or not isinstance(data, dict):
            raise AgentServerUnavailable(f"cancel answered {response.status_code}")
        return data.get("cancelled") is True

    def reload_token(self, *, token: Secret, remove_api_key: bool) -> list[str]:
        """POST /api/credentials/reload-token; returns the env_shadow names.

        Raises AgentServerUnavailable on transport failure and ReloadRefused (with the
        status) when the server answers anything but 200.
        """
        response = self._request(
            "POST",
            "/api/credentials/reload-token",
            json={"token": token.reveal(), "remove_api_key": remove_api_key},
            timeout=CONTROL_TIMEOUT,
        )
        if response.status_code != 200:
            raise ReloadRefused(response.status_code)
        return [str(name) for name in response.json().get("env_shadow", [])]


class ReloadRefused(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"reload-token answered {status_code}")
        self.status_code = status_code


class OffContract(ValueError):
    """An agent-server answer whose fields do not have the contract's shapes."""


def _count(value: Any, name: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OffContract(f"{name} is not a non-negative integer")
    return value


def _cost(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise OffContract("cost_usd is not a non-negative number")
    return float(value)


def _instant(value: Any) -> datetime | None:
    if not value:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None or parsed.tzinfo is None:
        raise OffContract("resets_at is not an aware ISO-8601 instant")
    return parsed


def _metered(value: Any) -> MeteredSpend | None:
    """The answer's ``metered`` object (None when absent: an older agent server)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise OffContract("metered is not an object")
    by_model = value.get("by_model") or {}
    if not isinstance(by_model, dict) or not all(isinstance(m, dict) for m in by_model.values()):
        raise OffContract("metered.by_model is not an object of objects")
    tokens = {
        name: sum(_count(m.get(name), f"metered.by_model.{name}") for m in by_model.values())
        for name in ("input_tokens", "output_tokens")
    }
    cost = _cost(value.get("cost_usd"))
    return MeteredSpend(
        requests=_count(value.get("requests"), "metered.requests"),
        cost_usd=cost or 0.0,
        input_tokens=tokens["input_tokens"],
        output_tokens=tokens["output_tokens"],
        budget_refused=_count(value.get("budget_refused"), "metered.budget_refused"),
    )


def _window(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 40:
        raise OffContract("limiting_window is not a window name")
    return value


# The rate-limit headers a forwarder relays: Anthropic's unified ones, a Codex plan's.
RATELIMIT_PREFIXES = ("anthropic-ratelimit-unified-", "x-codex-")
# More than the provider has ever sent for one answer (one per window and field).
RATELIMIT_MAX_HEADERS = 64


def _ratelimit(value: Any) -> dict[str, str]:
    """The served turn's unified headers; a malformed field is ignored, not a fault:
    it is a free reading, and the turn it came with was served and paid for."""
    if value is None:
        return {}
    if (
        not isinstance(value, dict)
        or len(value) > RATELIMIT_MAX_HEADERS
        or not all(
            isinstance(k, str)
            and k.startswith(RATELIMIT_PREFIXES)
            and isinstance(v, str)
            and len(k) <= 100
            and len(v) <= 100
            for k, v in value.items()
        )
    ):
        logger.warning("agent server sent a malformed upstream_ratelimit; ignored")
        return {}
    return dict(value)


def parse_turn_response(response: httpx.Response) -> TurnOutcome:
    """Map an agent-server answer to a TurnOutcome; anything off-contract is a fault.

    Never raises: a body that is not JSON, or whose fields have the wrong shapes, is a
    ``container_fault`` outcome (which never walks, so an off-contract answer cannot
    move a turn onto a second, billed credential).
    """
    try:
        data = response.json()
    except ValueError:
        data = None
    return parse_turn_answer(response.status_code, data, response.headers.get(AUTH_OVERRIDE_HEADER))


def parse_turn_answer(status: int, data: object, echo: str | None) -> TurnOutcome:
    """``parse_turn_response`` on an answer's status and parsed body."""
    if not isinstance(data, dict):
        return _fault(status, f"agent server answered {status} without a JSON body", echo)
    try:
        if status == 200:
            usage = data.get("usage") or {}
            if not isinstance(usage, dict):
                raise OffContract("usage is not an object")
            return TurnOutcome(
                status_code=200,
                ok=True,
                response=str(data.get("response", "")),
                model=str(data.get("model", "")),
                input_tokens=_count(usage.get("input_tokens"), "usage.input_tokens"),
                output_tokens=_count(usage.get("output_tokens"), "usage.output_tokens"),
                cost_usd=_cost(data.get("cost_usd")),
                override_echo=echo,
                upstream_ratelimit=_ratelimit(data.get("upstream_ratelimit")),
                metered=_metered(data.get("metered")),
            )
        resets_at = _instant(data.get("resets_at"))
        limiting_window = _window(data.get("limiting_window"))
        metered = _metered(data.get("metered"))
    except OffContract as exc:
        return _fault(status, f"agent server answered {status} off contract: {exc}", echo)
    return TurnOutcome(
        status_code=status,
        ok=False,
        error_code=str(data.get("error_code") or "container_fault"),
        detail=redact(str(data.get("detail", ""))),
        resets_at=resets_at,
        limiting_window=limiting_window,
        override_echo=echo,
        # A refused turn's own spend: what its served requests cost before it failed.
        input_tokens=metered.input_tokens if metered else 0,
        output_tokens=metered.output_tokens if metered else 0,
        cost_usd=metered.cost_usd if metered else None,
        metered=metered,
    )


def _fault(status: int, detail: str, echo: str | None) -> TurnOutcome:
    return TurnOutcome(
        status_code=status,
        ok=False,
        error_code="container_fault",
        detail=detail,
        override_echo=echo,
    )


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The stream's lines, each cut at ``RESULT_LINE_MAX`` (a longer one is dropped
    whole: whatever it was, it is off contract)."""
    buffer = b""
    overlong = False
    for chunk in chunks:
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1 :]
            if not overlong:
                yield line
            overlong = False
        if len(buffer) > RESULT_LINE_MAX:
            buffer, overlong = b"", True
    if buffer and not overlong:
        yield buffer


def turn_stream_read(
    lines: Iterator[bytes], echo: str | None, on_event: Callable[[object], None]
) -> TurnOutcome:
    """Read a streamed turn: events to ``on_event`` as they come, the answer from the
    ``result`` line. A stream that ends without one is a ``container_fault`` (never
    walks: it cannot move a turn onto a second, billed credential)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if item.get("type") == "event" and len(line) <= EVENT_LINE_MAX:
            on_event(item.get("event"))
        elif item.get("type") == "result":
            status = item.get("status")
            if isinstance(status, int) and not isinstance(status, bool):
                return parse_turn_answer(status, item.get("body"), echo)
            return _fault(200, "agent server's stream ended with a malformed result", echo)
    return _fault(200, "agent server's stream ended without a result", echo)
