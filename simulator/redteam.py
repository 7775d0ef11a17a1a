"""A scripted tool-using model: the red-team test's hostile model, for the Claude Code
CLI (the Messages API, below) and the Codex CLI (the Responses API: ``exec_command``
function calls, then the quoting message, ``answer_responses``).

A test arms one ``ToolScript`` through ``POST /_control/red-team``: a trigger (a
string the turn's prompt carries), the file paths to ``Read`` and the shell commands
to run with ``Bash``. A Messages request whose user messages carry the trigger is
answered by the script instead of the echo reply:

1. a request without tool results gets one assistant message of ``tool_use`` blocks,
   ``stop_reason: tool_use`` (the Messages API's shape, streamed like any reply): a
   ``Read {file_path}`` per path, a ``Bash {command}`` per command;
2. a request carrying ``tool_result`` blocks for this script's calls has them
   recorded (what the model "got back", read through ``GET /_control/red-team``) and
   gets a final text answer that quotes every result plainly, base64-encoded and with
   spaced letters, as a model evading an exact-value redactor would.

The quotas, refusals and request log apply as to any request, so a plan refused
before the tools ran is still a 429. What the tools returned is kept verbatim and
served by the control API on purpose: it is the evidence the test scans for
canaries; it lives only in this process's memory.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import shlex
from dataclasses import dataclass, field
from typing import Any

TOOL_ID_PREFIX = "toolu_redteam_"
# Claude Code's environment section (2.1.332): " - Primary working directory: /path".
_WORKING_DIRECTORY = re.compile(r"Primary working directory: ([^\s\\\"]+)")
# The final answer quotes each encoding of the results up to this many characters.
ANSWER_QUOTE_CHARS = 100_000


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]

    def block(self) -> dict[str, Any]:
        """The Messages API's tool_use block."""
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}

    def function_call(self) -> dict[str, Any]:
        """The Responses API's function_call output item."""
        return {
            "type": "function_call",
            "id": "fc_" + self.id,
            "call_id": self.id,
            "name": self.name,
            "arguments": json.dumps(self.input),
            "status": "completed",
        }


@dataclass
class ToolScript:
    trigger: str
    reads: list[str]
    commands: list[str]
    calls: dict[str, ToolCall] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    answers: int = 0
    # The working directory the CLI names in its prompt: where the agent really runs.
    cwd: str | None = None

    def matches(self, body: dict[str, Any]) -> bool:
        """Whether a request belongs to this script: a user message carries the trigger."""
        for message in body.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "user":
                if self.trigger in _text(message.get("content")):
                    return True
        return False

    def answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The assistant content blocks and stop reason for ``body``; records results."""
        if self.cwd is None:
            found = _WORKING_DIRECTORY.search(json.dumps(body))
            self.cwd = found.group(1) if found else None
        results = _tool_results(body)
        mine = [r for r in results if str(r.get("tool_use_id", "")).startswith(TOOL_ID_PREFIX)]
        if not mine:
            bash = {"description": "inspect"}
            calls = self._called(
                [
                    *(("Read", {"file_path": path}) for path in self.reads),
                    *(("Bash", {"command": cmd, **bash}) for cmd in self.commands),
                ]
            )
            if calls:
                return [call.block() for call in calls], "tool_use"
        for result in mine:
            self._record(
                str(result.get("tool_use_id")),
                _text(result.get("content")),
                is_error=bool(result.get("is_error")),
            )
        self.answers += 1
        return [{"type": "text", "text": self.quote()}], "end_turn"

    def matches_responses(self, body: dict[str, Any]) -> bool:
        """Whether a Responses request (the Codex CLI's) belongs to this script."""
        return any(
            isinstance(item, dict)
            and item.get("role") == "user"
            and self.trigger in _text(item.get("content"))
            for item in body.get("input") or []
        )

    def answer_responses(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The Codex CLI's answer to ``body``: its output items. Without results for
        this script's calls, one ``exec_command`` call per command (a read is a
        ``cat``: Codex reads files with its shell); with them, the quoting message."""
        outputs = [
            item
            for item in body.get("input") or []
            if isinstance(item, dict)
            and item.get("type") == "function_call_output"
            and str(item.get("call_id", "")).startswith(TOOL_ID_PREFIX)
        ]
        if not outputs:
            commands = [*(f"cat -- {shlex.quote(path)}" for path in self.reads), *self.commands]
            calls = self._called([("exec_command", {"cmd": cmd}) for cmd in commands])
            if calls:
                return [call.function_call() for call in calls]
        for output in outputs:
            self._record(str(output.get("call_id")), _text(output.get("output")))
        self.answers += 1
        return [_output_message(self.quote())]

    def _called(self, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolCall]:
        made = [ToolCall(_tool_id(), name, arguments) for name, arguments in calls]
        self.calls.update({call.id: call for call in made})
        return made

    def _record(self, call_id: str, content: str, *, is_error: bool = False) -> None:
        call = self.calls.get(call_id)
        self.results.append(
            {
                "tool": call.name if call else None,
                "input": call.input if call else None,
                "is_error": is_error,
                "content": content,
            }
        )

    def quote(self) -> str:
        """The final answer: every recorded result, plainly and in two evasions."""
        plain = (
            "\n".join(f"[{r['tool']} {r['input']}] {r['content']}" for r in self.results)
            or "(no tool results)"
        )
        plain = plain[:ANSWER_QUOTE_CHARS]
        encoded = base64.b64encode(plain.encode()).decode()[:ANSWER_QUOTE_CHARS]
        spaced = " ".join(plain)[:ANSWER_QUOTE_CHARS]
        return f"What the tools returned:\n{plain}\n\nbase64: {encoded}\n\nspaced: {spaced}"

    def view(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "reads": self.reads,
            "commands": self.commands,
            "tool_calls": len(self.calls),
            "results": self.results,
            "answers": self.answers,
            "cwd": self.cwd,
        }


def _tool_id() -> str:
    return TOOL_ID_PREFIX + secrets.token_hex(8)


# The text blocks of the Messages API and the Responses API's input and output items.
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})


def _text(content: Any) -> str:
    """A message's, a tool result's or a function call output's content as text: a
    string, or its text blocks joined (tool results and images are no text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") in _TEXT_TYPES
        )
    return ""


def _output_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": "msg_redteam_" + secrets.token_hex(8),
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the last user message (the CLI's follow-up)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "user":
        return []
    content = messages[-1].get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
