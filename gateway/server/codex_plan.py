"""A Responses request served by a ChatGPT/Codex plan: the plan's backend takes only a
streamed request whose ``input`` is a list of items, so the gateway sends it that
way and, for a client that asked for one JSON answer, collects the stream into the
``response`` object the platform API would have answered. A request the OpenAI key
serves goes to the platform API as the client sent it."""

from __future__ import annotations

import json
from typing import Any, Final

import httpx

from agent_server.metering import RequestMeter

# The largest streamed answer collected into one JSON answer.
MAX_COLLECTED: Final = 64 * 1024 * 1024
_DONE: Final = ("response.completed", "response.incomplete", "response.failed")


def plan_body(body: bytes) -> bytes:
    """``body`` as the plan's backend takes it: streamed, not stored, its input a list."""
    payload: dict[str, Any] = json.loads(body)
    given = payload.get("input")
    if isinstance(given, str):
        payload["input"] = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": given}]}
        ]
    payload["stream"] = True
    payload.setdefault("store", False)
    return json.dumps(payload).encode()


class CollectFailed(Exception):
    """The stream ended without a final response event."""


async def collected(response: httpx.Response, meter: RequestMeter | None) -> bytes:
    """The final ``response`` object of a streamed answer, as JSON (metered as read)."""
    buffer = bytearray()
    async for chunk in response.aiter_raw():
        buffer += chunk
        if meter is not None:
            meter.feed(chunk)
        if len(buffer) > MAX_COLLECTED:
            raise CollectFailed("the streamed answer is too large to collect")
    if meter is not None:
        meter.finish()
    for line in reversed(buffer.decode("utf-8", "replace").splitlines()):
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") in _DONE:
            final = event.get("response")
            if isinstance(final, dict):
                return json.dumps(final).encode()
    raise CollectFailed("the stream ended without a final response")
