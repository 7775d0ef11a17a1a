"""One upstream exchange of a gateway request: send on a rung, and either hold a
refusal for the planner (the client never sees it) or relay the answer to the client
as it arrives, metered, until it ends, the client leaves or the key is revoked."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from aiohttp import ClientError, ClientResponse

from agent_server.metering import GrantMeter, RequestMeter
from agent_server.relay import RESPONSE_DROPPED
from agent_server.upstream import MAX_REFUSAL_BYTES, ratelimit_headers
from gateway.catalog import ANTHROPIC, BILLED
from gateway.server.client import Unreachable, UpstreamClient, chunks
from gateway.server.codex_plan import CollectFailed, collected, plan_body
from gateway.server.inbound import Inbound
from gateway.server.keybook import REVOKED
from gateway.server.shapes import answer_error, sse_error
from gateway.server.upstream import Refusal, Upstreams, classify, request_headers
from routing.planner import Outcome
from routing.rung import Rung, RungKind
from trinity import clock
from trinity_contract.prices import ANTHROPIC as PRICE_ANTHROPIC
from trinity_contract.prices import OPENAI as PRICE_OPENAI
from trinity_contract.redaction import mask

logger = logging.getLogger(__name__)

# Never relayed to the client: connection headers, and anything that could carry
# an upstream session.
_ANSWER_DROPPED: Final = RESPONSE_DROPPED | {"set-cookie"}


class Revoked(Exception):
    """The gateway key was revoked while its answer streamed."""


@dataclass
class Call:
    """A client request in flight: what it asked and what happened to it."""

    request_id: str
    key_id: int
    owner_id: int
    provider: str
    path: str
    query: bytes
    headers: list[tuple[bytes, bytes]]
    inbound: Inbound
    at: datetime
    receive: Any
    send: Any
    status: int = 0
    served_by: Rung | None = None
    attempts: int = 0
    switched: bool = False
    disconnected: bool = False
    meter: GrantMeter | None = None
    started_response: bool = False
    # When the first attempt left for the provider (perf_counter; 0: none did).
    sent_at: float = 0.0
    # Told the name of the plan or key serving the answer (the open streams' list).
    on_served: Callable[[str], None] | None = None
    readings: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    # The plans this request holds a concurrency lease on (given back after it).
    leases: list[int] = field(default_factory=list)
    # Why the key's refusal ended this request in flight (revoked, owner deactivated).
    ended_why: str = REVOKED


def price_provider(provider: str) -> str:
    return PRICE_ANTHROPIC if provider == "anthropic" else PRICE_OPENAI


async def exchange(
    client: UpstreamClient, upstreams: Upstreams, call: Call, rung: Rung
) -> Outcome | Refusal | None:
    """Send ``call`` on ``rung``. Returns the served outcome once the answer was relayed
    whole (or cut by the client or a revocation), a held Refusal the planner walks on,
    or None when the answer was the client's own error and was relayed as it was."""
    url = upstreams.url(rung, call.path)
    if call.query:
        url += "?" + call.query.decode("latin-1")
    call.attempts += 1
    call.sent_at = call.sent_at or time.perf_counter()
    on_plan = rung.provider != ANTHROPIC and rung.kind is RungKind.SUBSCRIPTION
    body = plan_body(call.inbound.body, call.inbound.payload) if on_plan else call.inbound.body
    try:
        response = await client.post(url, request_headers(call.headers, rung), body)
    except Unreachable as exc:
        logger.warning("gateway: upstream unreachable: %s", exc)
        failed = Outcome(False, "upstream_error", "the gateway could not reach the provider")
        return Refusal(failed, True, 502)
    try:
        _observe(call, rung, response)
        if response.status >= 400:
            body = await _error_body(response)
            refusal = classify(
                rung=rung,
                status=response.status,
                body=body,
                headers=response.headers,
                now=clock.now(),
            )
            if refusal.held:
                return refusal
            await _answer(call, response, _masked(body, rung))
            return None
        if on_plan and not call.inbound.stream:
            return await _collect_served(call, response, rung)
        return await _relay_served(call, response, rung)
    finally:
        # Read whole, it went back to the pool already; cut short, it is closed.
        response.close()


def _served(call: Call, rung: Rung) -> None:
    call.served_by = rung
    if call.on_served is not None:
        call.on_served(rung.name)


def _observe(call: Call, rung: Rung, response: ClientResponse) -> None:
    """Keep the answer's rate-limit headers as a reading of the plan it was spent on."""
    if rung.kind is RungKind.SUBSCRIPTION and rung.subscription_id is not None:
        limits = ratelimit_headers(response.headers)
        if limits:
            call.readings.append((rung.subscription_id, limits))


async def _error_body(response: ClientResponse) -> bytes:
    kept = bytearray()
    async for chunk in chunks(response):
        kept += chunk
        if len(kept) >= MAX_REFUSAL_BYTES:
            break
    return bytes(kept[:MAX_REFUSAL_BYTES])


def _masked(body: bytes, rung: Rung) -> bytes:
    """An error body the client will read, with the credential masked should the
    provider have quoted it."""
    secret = rung.secret.reveal()
    return body.replace(secret.encode(), mask(secret).encode()) if secret else body


def _start(call: Call, response: ClientResponse) -> dict[str, Any]:
    call.status = response.status
    call.started_response = True
    return {
        "type": "http.response.start",
        "status": response.status,
        "headers": [
            (name, value)
            for name, value in response.raw_headers
            if name.decode("latin-1").lower() not in _ANSWER_DROPPED
        ],
    }


async def _answer(call: Call, response: ClientResponse, body: bytes) -> None:
    """The provider's own error for the client's own mistake, as the provider said it."""
    start = _start(call, response)
    start["headers"] = [(n, v) for n, v in start["headers"] if n.lower() != b"content-length"]
    start["headers"].append((b"content-length", str(len(body)).encode()))
    await call.send(start)
    await call.send({"type": "http.response.body", "body": body, "more_body": False})


async def _collect_served(call: Call, response: ClientResponse, rung: Rung) -> Outcome:
    """A Codex plan's streamed answer to a client that asked for one JSON answer."""
    grant = GrantMeter(price_provider(call.provider))
    _served(call, rung)
    call.meter = grant
    meter = grant.request(headers=response.headers)
    try:
        payload = await collected(chunks(response), meter)
    except (CollectFailed, ClientError, OSError) as exc:
        logger.warning("gateway: a Codex plan's answer could not be collected: %s", exc)
        await answer_error(call.send, call.provider, 502, "the plan's answer ended early")
        call.status = 502
        return Outcome(True)
    call.status = 200
    call.started_response = True
    await call.send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await call.send({"type": "http.response.body", "body": payload, "more_body": False})
    return Outcome(True)


async def _relay_served(call: Call, response: ClientResponse, rung: Rung) -> Outcome:
    """Relay a served answer, metered; a client that leaves or a revoked key stops it
    (the upstream stream is closed by the caller, the usage so far kept)."""
    grant = GrantMeter(price_provider(call.provider))
    call.meter = grant
    _served(call, rung)
    meter = grant.request(headers=response.headers) if call.path in BILLED else None
    await call.send(_start(call, response))
    relaying = asyncio.ensure_future(_pump(response, call.send, meter))
    leaving = asyncio.ensure_future(_client_leaves(call.receive))
    try:
        await asyncio.wait({relaying, leaving}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # The key was revoked: end the stream with an error the client shows.
        relaying.cancel()
        await _end_revoked(call, response)
        if meter is not None:
            meter.finish()
        raise Revoked from None
    finally:
        leaving.cancel()
    if not relaying.done():
        call.disconnected = True
        relaying.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await relaying
        if meter is not None:
            meter.finish()
    else:
        with contextlib.suppress(ClientError, OSError):
            relaying.result()
    return Outcome(True)


async def _pump(response: ClientResponse, send: Any, meter: RequestMeter | None) -> None:
    """Send the answer on as it arrives. Each read takes all aiohttp holds (one read
    often carries several SSE events), so each is one write to the client; metering
    reads a chunk after it went out, so it costs the client no latency."""
    async for chunk in chunks(response):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if meter is not None:
            meter.feed(chunk)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    if meter is not None:
        meter.finish()


async def _client_leaves(receive: Any) -> None:
    """Returns when the client disconnects (the body was read whole already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _end_revoked(call: Call, response: ClientResponse) -> None:
    message = call.ended_why
    streamed = "text/event-stream" in response.headers.get("content-type", "")
    with contextlib.suppress(Exception):
        body = sse_error(call.provider, 401, message) if streamed else b""
        await call.send({"type": "http.response.body", "body": body, "more_body": False})
