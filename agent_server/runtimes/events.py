"""What a turn shows while it runs: the contract's events, bounded and redacted.

Each CLI runtime reads its CLI's stdout a line at a time (`process.CliProcesses`),
asks its CLI's line module what the line means (`claude_events`, `codex_events`: a
list of raw events, pure functions) and hands them to the spawn's `EventBounds`,
which alone decides what leaves the process:

- every string goes through the server's Redactor; answer text is held back up to
  its last whitespace while it streams, so a credential the model writes in several
  pieces is masked whole (a credential shape has no whitespace in it);
- every field is cut to the contract's size, text over `TEXT_CHARS` is split;
- per spawn at most `MAX_EVENTS` events or `MAX_EVENT_BYTES` of event text: at the
  cap one `truncated` event, then nothing more from the CLI (the turn goes on, its
  result is not affected).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from trinity_contract.redaction import Redactor

Event = dict[str, Any]
Emit = Callable[[Event], None]

# The contract's caps (agent_server/contract.py, "Streamed turns").
TEXT_CHARS: Final = 4000
ID_CHARS: Final = 100
NAME_CHARS: Final = 100
INPUT_CHARS: Final = 300
OUTPUT_CHARS: Final = 500
MAX_EVENTS: Final = 1000
MAX_EVENT_BYTES: Final = 256 * 1024
# A CLI line longer than this is never read as events (a runtime may still read it
# for its result, up to process.LINE_LIMIT).
EVENT_LINE_BYTES: Final = 1024 * 1024
ELLIPSIS: Final = "…"


def json_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object on `line`, or None for anything else (never raises)."""
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked with "…"."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def text_event(text: str) -> Event:
    return {"kind": "text", "text": text}


def tool_call_event(id_: str, name: str, summary: str) -> Event:
    return {"kind": "tool_call", "id": id_, "name": name, "input": summary}


def tool_result_event(id_: str, ok: bool, output: str) -> Event:
    return {"kind": "tool_result", "id": id_, "ok": ok, "output": output}


def tool_summary(name: str, tool_input: object) -> str:
    """A tool call's input for a person: Bash's command, a file tool's path, else
    compact JSON (uncut: `EventBounds` cuts it)."""
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "notebook_path", "path"):
            if isinstance(tool_input.get(key), str):
                return str(tool_input[key])
    if isinstance(tool_input, str):
        return tool_input
    try:
        return json.dumps(tool_input, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return ""


class EventBounds:
    """One spawn's events on their way out: redacted, cut, capped (see the module)."""

    def __init__(self, *, redactor: Redactor, emit: Emit) -> None:
        self._redactor = redactor
        self._emit = emit
        self._pending = ""
        self._events = 0
        self._bytes = 0
        self._stopped = False

    @property
    def stopped(self) -> bool:
        """Whether the cap was reached: nothing more goes out."""
        return self._stopped

    def take(self, events: list[Event]) -> None:
        """The events of one CLI line. A line with no text ends a run of text."""
        if not any(event.get("kind") == "text" for event in events):
            self._flush_text(final=True)
        for event in events:
            if event.get("kind") == "text":
                self._pending += str(event.get("text", ""))
                self._flush_text(final=False)
            else:
                self._flush_text(final=True)
                self._send(self._bounded(event))

    def close(self) -> None:
        """The CLI's output ended: the held-back text goes out."""
        self._flush_text(final=True)

    def _flush_text(self, *, final: bool) -> None:
        if not self._pending:
            return
        text = self._pending
        if not final and len(text) <= TEXT_CHARS:
            cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
            if cut < 0:
                return  # no whitespace yet: the piece may be the start of a credential
            text, self._pending = text[: cut + 1], text[cut + 1 :]
        else:
            self._pending = ""
        text = self._redactor.redact(text)
        for start in range(0, len(text), TEXT_CHARS):
            self._send(text_event(text[start : start + TEXT_CHARS]))

    def _bounded(self, event: Event) -> Event:
        redact = self._redactor.redact
        id_ = clip(redact(str(event.get("id", ""))), ID_CHARS)
        if event.get("kind") == "tool_call":
            name = clip(redact(str(event.get("name", ""))), NAME_CHARS)
            summary = clip(redact(str(event.get("input", ""))), INPUT_CHARS)
            return tool_call_event(id_, name, summary)
        output = clip(redact(str(event.get("output", ""))), OUTPUT_CHARS)
        return tool_result_event(id_, bool(event.get("ok")), output)

    def _send(self, event: Event) -> None:
        if self._stopped:
            return
        size = sum(len(v.encode()) for v in event.values() if isinstance(v, str))
        if self._events + 1 > MAX_EVENTS or self._bytes + size > MAX_EVENT_BYTES:
            self._stopped = True
            self._pending = ""
            self._emit({"kind": "truncated", "dropped": 1})
            return
        self._events += 1
        self._bytes += size
        self._emit(event)
