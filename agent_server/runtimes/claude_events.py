"""What a line of `claude -p --output-format stream-json --verbose` means as events.

Lines seen from the pinned CLI (2.1.332, with `--include-partial-messages`):
`system` (init, status), `stream_event` (the provider's stream events as they
arrive: a `content_block_delta` of type `text_delta` is answer text), `assistant`
(a whole message: its `tool_use` blocks are tool calls, its text the same text the
deltas carried), `user` (the CLI's `tool_result` blocks), `rate_limit_event` and the
last line, `type: result` (read by `claude_code.interpret_cli_exit`, no event).

Text comes from the deltas of a message; a message that streamed none (a CLI
without partial messages) gives its text from the `assistant` line instead. Only the
main conversation counts: lines of a subagent (`parent_tool_use_id` set) are its
own work, not the answer.
"""

from __future__ import annotations

from typing import Any

from agent_server.runtimes.events import (
    Event,
    text_event,
    tool_call_event,
    tool_result_event,
    tool_summary,
)


def is_result(line: dict[str, Any]) -> bool:
    """Whether a parsed line is the CLI's result object."""
    return "is_error" in line or line.get("type") == "result"


def claude_line_events(line: dict[str, Any], streamed: set[str]) -> list[Event]:
    """The events of one parsed line. `streamed` holds the ids of the messages whose
    text arrived as deltas (this function adds to it): their whole text is not
    repeated."""
    if line.get("parent_tool_use_id"):
        return []
    kind = line.get("type")
    if kind == "stream_event":
        return _delta_events(line, streamed)
    message = line.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return []
    blocks = [block for block in message["content"] if isinstance(block, dict)]
    if kind == "assistant":
        return _assistant_events(blocks, already=message.get("id") in streamed)
    if kind == "user":
        return [_result_event(block) for block in blocks if block.get("type") == "tool_result"]
    return []


def _delta_events(line: dict[str, Any], streamed: set[str]) -> list[Event]:
    event = line.get("event")
    if not isinstance(event, dict) or event.get("type") != "content_block_delta":
        return []
    delta = event.get("delta")
    if not isinstance(delta, dict) or delta.get("type") != "text_delta":
        return []
    text = delta.get("text")
    if not isinstance(text, str) or not text:
        return []
    message_id = line.get("api_message_id")
    if isinstance(message_id, str):
        streamed.add(message_id)
    return [text_event(text)]


def _assistant_events(blocks: list[dict[str, Any]], *, already: bool) -> list[Event]:
    events: list[Event] = []
    for block in blocks:
        if block.get("type") == "text" and not already and isinstance(block.get("text"), str):
            events.append(text_event(block["text"]))
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "")
            summary = tool_summary(name, block.get("input"))
            events.append(tool_call_event(str(block.get("id") or ""), name, summary))
    return events


def _result_event(block: dict[str, Any]) -> Event:
    return tool_result_event(
        str(block.get("tool_use_id") or ""),
        not block.get("is_error"),
        _content_text(block.get("content")),
    )


def _content_text(content: object) -> str:
    """A tool result's content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""
