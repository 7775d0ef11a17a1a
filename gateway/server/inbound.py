"""What a client's request says, read once: its body (bounded), the model, whether it
streams, and the session it belongs to."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from agent_server.relay import BodyTooLarge, body_chunks, content_length
from gateway.catalog import ANTHROPIC

# Claude Code's metadata.user_id ends in the session: "user_<hash>_account_<uuid>_session_<uuid>".
_SESSION: Final = re.compile(r"session_([0-9A-Za-z-]{8,100})$")
SESSION_CHARS: Final = 200


class BadRequest(Exception):
    """The request cannot be served as sent; ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Inbound:
    """One client request, parsed."""

    body: bytes
    model: str
    stream: bool
    session_id: str
    # The body, parsed (a Codex plan's request is reshaped from it, never parsed twice).
    payload: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)


async def read_body(scope: dict[str, Any], receive: Any, limit: int) -> bytes:
    """The whole request body, at most ``limit`` bytes (413 past it, also when the
    declared length says so before a byte is read)."""
    declared = content_length(scope["headers"])
    if declared is not None and declared > limit:
        raise BadRequest(413, f"request body larger than {limit} bytes")
    parts = []
    try:
        async for chunk in body_chunks(receive, limit):
            parts.append(chunk)
    except BodyTooLarge:
        raise BadRequest(413, f"request body larger than {limit} bytes") from None
    return b"".join(parts)


def parse(provider: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> Inbound:
    """The model, stream flag and session of a Messages or Responses request.

    Raises BadRequest (400) for a body that is not a JSON object or names no model."""
    try:
        payload = orjson.loads(body)
    except ValueError:  # orjson's JSONDecodeError, invalid UTF-8 included
        raise BadRequest(400, "the request body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip():
        raise BadRequest(400, "model: a model name is required")
    return Inbound(
        body=body,
        model=model.strip(),
        stream=payload.get("stream") is True,
        session_id=_session(provider, payload, headers)[:SESSION_CHARS],
        payload=payload,
    )


def _session(provider: str, payload: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> str:
    """The client's session: Claude Code's (``metadata.user_id``), the Codex CLI's
    (``prompt_cache_key``, else its ``session_id`` header); "" when it names none."""
    if provider == ANTHROPIC:
        metadata = payload.get("metadata")
        user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
        if not isinstance(user_id, str):
            return ""
        match = _SESSION.search(user_id)
        return match.group(1) if match else user_id
    cache_key = payload.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return cache_key
    for name, value in headers:
        if name.lower() in (b"session_id", b"session-id", b"conversation_id"):
            return value.decode("latin-1")
    return ""
