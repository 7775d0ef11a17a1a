"""Deterministic Messages API replies: the text, the token counts and the SSE events."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

from trinity_contract.prices import TokenUsage

REPLY_PREFIX = "Simulated reply: "
ECHO_CHARS = 80
SSE_CHUNK_CHARS = 24


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        return content_text(block.get("content", ""))
    if kind == "tool_use":
        return json.dumps(block.get("input", {}), sort_keys=True)
    return ""


def content_text(content: Any) -> str:
    """All text in a message's ``content`` (a string or a list of blocks)."""
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content) if t)
    return _block_text(content)


def prompt_text(body: dict[str, Any]) -> str:
    """The text a request sends: its system prompt and every message."""
    parts = [content_text(body.get("system", ""))]
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            parts.append(content_text(message.get("content", "")))
    return "\n".join(p for p in parts if p)


def last_user_text(body: dict[str, Any]) -> str:
    """The last plain text block of the last user message.

    Claude Code puts ``<system-reminder>`` blocks beside the prompt; those are skipped
    so the echo shows what the user asked.
    """
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content", "")
        blocks = content if isinstance(content, list) else [content]
        texts = [_block_text(b) for b in blocks]
        plain = [t for t in texts if t.strip() and not t.lstrip().startswith("<")]
        chosen = plain or [t for t in texts if t.strip()]
        return chosen[-1] if chosen else ""
    return ""


def tokens_for(text: str) -> int:
    """About four characters a token, never below one."""
    return max(1, len(text) // 4)


def reply_text(body: dict[str, Any]) -> str:
    echo = " ".join(last_user_text(body).split())[:ECHO_CHARS]
    return REPLY_PREFIX + echo if echo else REPLY_PREFIX.rstrip(": ") + "."


def new_message_id() -> str:
    return "msg_sim_" + secrets.token_hex(12)


def new_request_id() -> str:
    return "req_sim_" + secrets.token_hex(12)


class Reply:
    """One assistant turn computed from a request body."""

    def __init__(
        self,
        body: dict[str, Any],
        model: str,
        *,
        scripted: tuple[list[dict[str, Any]], str] | None = None,
    ) -> None:
        """The echo reply, or ``scripted`` (content blocks, stop reason) as given."""
        self.model = model
        self.input_tokens = tokens_for(prompt_text(body))
        self.id = new_message_id()
        if scripted is not None:
            self.blocks, self.stop_reason = scripted
            self.text = content_text(self.blocks)
            self.output_tokens = tokens_for(self.text)
            return
        text = reply_text(body)
        self.stop_reason = "end_turn"
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens >= 1 and tokens_for(text) > max_tokens:
            text = text[: max_tokens * 4]
            self.stop_reason = "max_tokens"
        self.text = text
        self.blocks = [{"type": "text", "text": text}]
        self.output_tokens = tokens_for(text)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def billed(self) -> TokenUsage:
        """What the answer is billed for: the usage it reports (no prompt cache)."""
        return TokenUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)

    def usage(self, *, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        }

    def message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": self.usage(output_tokens=self.output_tokens),
        }

    def sse_events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event name, data) pairs in the order the real API streams them."""
        start = self.message() | {
            "content": [],
            "stop_reason": None,
            "usage": self.usage(output_tokens=1),
        }
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(self.blocks):
            yield from _block_events(index, block)
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": self.output_tokens},
            },
        )
        yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One content block as the API streams it: text in ``text_delta`` chunks, a
    ``tool_use`` block opened with an empty input and filled by ``input_json_delta``."""
    if block.get("type") == "tool_use":
        opened = {**block, "input": {}}
        payload, key, delta_type = (
            json.dumps(block.get("input", {})),
            "partial_json",
            "input_json_delta",
        )
    else:
        opened = {"type": "text", "text": ""}
        payload, key, delta_type = str(block.get("text", "")), "text", "text_delta"
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": opened},
    )
    # A long scripted answer streams in at most about 256 chunks.
    step = max(SSE_CHUNK_CHARS, len(payload) // 256)
    for i in range(0, len(payload), step):
        yield (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": delta_type, key: payload[i : i + step]},
            },
        )
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def sse_frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def paced(sim: Any, frames: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A stream's frames, ``sim.stream_pause_ms`` apart; a stream its client left
    before the last frame is counted in ``sim.streams_cut``."""
    done = False
    try:
        for index, frame in enumerate(frames):
            if index and sim.stream_pause_ms:
                await asyncio.sleep(sim.stream_pause_ms / 1000)
            yield frame
        done = True
    finally:
        if not done:
            sim.streams_cut += 1
