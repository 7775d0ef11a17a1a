"""Relaying one HTTP exchange between two hops, shared by the agent server's forwarder
and the gateway: which headers never cross, the request body read within a limit, the
answer's bytes sent on as they arrive, the credential a client presents, and an error
answer in JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx

from agent_server.metering import RequestMeter

# Never copied between the two hops: they describe one connection, or carry the
# credential, or are recomputed by httpx.
REQUEST_DROPPED: Final = frozenset(
    {
        "host",
        "authorization",
        "x-api-key",
        # Which account or organisation pays is the grant's to say, never the agent's.
        "chatgpt-account-id",
        "openai-organization",
        # Replaced by identity: metering reads the answer's usage, and an encoding it
        # cannot decode (br, zstd) must not be a way to spend unmetered.
        "accept-encoding",
        "openai-project",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
RESPONSE_DROPPED: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "trailer", "upgrade", "date", "server"}
)


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


def content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def body_chunks(receive: Any, limit: int) -> AsyncIterator[bytes]:
    """The request body as the client sends it, at most ``limit`` bytes (more raises
    BodyTooLarge; a client gone raises ClientGone)."""
    seen = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise BodyTooLarge
        more = message.get("more_body", False)
        if chunk:
            yield chunk


async def relay(
    response: httpx.Response, send: Any, *, keep: int = 0, meter: RequestMeter | None = None
) -> bytes:
    """Send the answer's raw bytes on as they arrive (no decoding: content-encoding
    passes through with its content-length), never holding a byte back to wait for
    the network. Returns the first `keep` bytes it relayed (an error body to read).
    `meter` reads each write's bytes right after they were handed on, so metering
    costs the reader no latency: it runs while the forwarder waits for the network.

    Chunks the upstream's last read already holds (one read often carries several
    SSE events) go out in one write: each write on loopback is a syscall that
    delivers to the reader at once, the forwarder's main cost per request. Before
    waiting on the network, whatever is pending is sent.
    """
    chunks = response.aiter_raw()
    pending = bytearray()
    kept = bytearray()
    upcoming = asyncio.ensure_future(anext(chunks))
    try:
        while True:
            if not upcoming.done():
                if pending:
                    await send(
                        {"type": "http.response.body", "body": bytes(pending), "more_body": True}
                    )
                    if meter is not None:
                        meter.feed(bytes(pending))
                    pending.clear()
                await asyncio.wait({upcoming})
            try:
                chunk = upcoming.result()
            except StopAsyncIteration:
                break
            pending += chunk
            if len(kept) < keep:
                kept += chunk[: keep - len(kept)]
            upcoming = asyncio.ensure_future(anext(chunks))
            await asyncio.sleep(0)  # one loop turn: lets it take what is already read
    finally:
        if not upcoming.done():
            upcoming.cancel()
    await send({"type": "http.response.body", "body": bytes(pending), "more_body": False})
    if meter is not None:
        meter.feed(bytes(pending))
        meter.finish()
    return bytes(kept)


def presented(headers: list[tuple[bytes, bytes]]) -> str:
    """The capability a request presents: a Bearer token, else the x-api-key."""
    api_key = ""
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
        elif lowered == b"x-api-key":
            api_key = value.decode("latin-1").strip()
    return api_key


async def answer_json(
    send: Any,
    status: int,
    body: dict[str, Any],
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})
