"""A Responses request served by a ChatGPT/Codex plan: the plan's backend takes only a
streamed request whose ``input`` is a list of items, so the gateway sends it that
way and, for a client that asked for one JSON answer, collects the stream into the
``response`` object the platform API would have answered. A request the OpenAI key
serves goes to the platform API as the client sent it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import orjson

from agent_server.metering import RequestMeter

# The largest streamed answer collected into one JSON answer.
MAX_COLLECTED: Final = 64 * 1024 * 1024
_DONE: Final = ("response.completed", "response.incomplete", "response.failed")


def plan_body(body: bytes, payload: dict[str, Any]) -> bytes:
    """``body`` (parsed: ``payload``) as the plan's backend takes it: streamed, not
    stored, its input a list. The Codex CLI's requests are so already, and go as sent."""
    given = payload.get("input")
    if payload.get("stream") is True and isinstance(given, list) and "store" in payload:
        return body
    reshaped = dict(payload)
    if isinstance(given, str):
        reshaped["input"] = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": given}]}
        ]
    reshaped["stream"] = True
    reshaped.setdefault("store", False)
    return orjson.dumps(reshaped)


class CollectFailed(Exception):
    """The stream ended without a final response event."""


async def collected(body: AsyncIterator[bytes], meter: RequestMeter | None) -> bytes:
    """The final ``response`` object of a streamed answer, as JSON (metered as read)."""
    buffer = bytearray()
    async for chunk in body:
        buffer += chunk
        if meter is not None:
            meter.feed(chunk)
        if len(buffer) > MAX_COLLECTED:
            raise CollectFailed("the streamed answer is too large to collect")
    if meter is not None:
        meter.finish()
    # The final event is the last one: read the lines from the end, decode only those.
    for line in reversed(bytes(buffer).split(b"\n")):
        if not line.startswith(b"data:"):
            continue
        try:
            event = orjson.loads(line[5:])
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") in _DONE:
            final = event.get("response")
            if isinstance(final, dict):
                return orjson.dumps(final)
    raise CollectFailed("the stream ended without a final response")
