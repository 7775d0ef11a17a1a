"""Errors in the shape of the API a client spoke: an Anthropic client reads
``{"type": "error", "error": {"type", "message"}}``, an OpenAI one
``{"error": {"message", "type", "param", "code"}}``; the CLIs and SDKs show the
message. Every answer the gateway makes itself goes through here."""

from __future__ import annotations

import json
from typing import Any, Final

from agent_server.relay import answer_json
from gateway.catalog import ANTHROPIC

# Anthropic's error type for each status the gateway answers itself.
_ANTHROPIC_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
}
# OpenAI's (type, code) for the same statuses.
_OPENAI_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", "overloaded"),
}


def error_body(provider: str, status: int, message: str, *, code: str | None = None) -> bytes:
    """The error an API of ``provider`` would answer with ``status``."""
    if provider == ANTHROPIC:
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind, default_code = _OPENAI_TYPES.get(status, ("server_error", None))
    body = {"message": message, "type": kind, "param": None, "code": code or default_code}
    return json.dumps({"error": body}).encode()


def sse_error(provider: str, status: int, message: str) -> bytes:
    """The same error as the last event of a stream already under way."""
    if provider == ANTHROPIC:
        return b"event: error\ndata: " + error_body(provider, status, message) + b"\n\n"
    payload = json.loads(error_body(provider, status, message))
    event = {"type": "error", **payload["error"]}
    return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"


async def answer_error(
    send: Any,
    provider: str,
    status: int,
    message: str,
    *,
    retry_after: int | None = None,
    final: bool = False,
    code: str | None = None,
) -> None:
    """Answer an error in ``provider``'s shape. ``retry_after`` (seconds) goes out as
    ``Retry-After``; ``final`` adds ``x-should-retry: false``, which the official SDKs
    and the CLIs obey (a cap that reopens tomorrow is not worth their retries)."""
    extra: list[tuple[bytes, bytes]] = []
    if retry_after is not None:
        extra.append((b"retry-after", str(max(1, int(retry_after))).encode()))
    if final:
        extra.append((b"x-should-retry", b"false"))
    await answer_json(
        send, status, json.loads(error_body(provider, status, message, code=code)), extra=extra
    )
