"""The requests ``bench/gateway.py`` sends: about 50 KB each, shaped as the CLIs send them.

A Claude Code Messages request: a long system prompt in two cached blocks, the CLI's
tool definitions (a description and a JSON schema each), a conversation with a
system reminder, a tool call and its result, and the session in ``metadata.user_id``.
A Codex CLI Responses request: long instructions, function tools, the environment
context, a conversation with a function call and its output, a prompt cache key.
The text is deterministic prose (a fixed seed), so every run sends the same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

WORDS = (
    "the agent reads each file before it edits it and keeps the change as small as the task "
    "allows run the tests that cover the module you touched and report what failed with the "
    "command and its output never guess a path list the directory first prefer the project's "
    "own helpers over new ones a function states its contract in its docstring comments say "
    "why not what when a command fails read its error before retrying use absolute paths "
    "quote arguments that may contain spaces do not commit unless asked keep secrets out of "
    "logs and answers summarise the result in two sentences at most"
).split()


def prose(chars: int, *, seed: int) -> str:
    """About ``chars`` characters of sentences drawn from ``WORDS`` (deterministic)."""
    rng = random.Random(seed)  # noqa: S311 - filler text, not a secret
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 22)))
        sentence = sentence[0].upper() + sentence[1:] + ". "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:chars]


def _schema(seed: int, properties: int) -> dict[str, Any]:
    rng = random.Random(seed)  # noqa: S311 - filler, not a secret
    props = {
        f"{rng.choice(WORDS)}_{i}": {
            "type": rng.choice(("string", "integer", "boolean")),
            "description": prose(rng.randint(60, 200), seed=seed * 100 + i),
        }
        for i in range(properties)
    }
    return {
        "type": "object",
        "properties": props,
        "required": sorted(props)[:2],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }


CLAUDE_TOOLS = (
    "Task Bash Glob Grep LS ExitPlanMode Read Edit MultiEdit Write NotebookEdit "
    "WebFetch TodoWrite WebSearch BashOutput KillShell"
).split()


def messages_body(*, stream: bool, session: str) -> dict[str, Any]:
    """A Claude Code turn's second request (after one tool call), about 50 KB."""
    tools = [
        {
            "name": name,
            "description": prose(1100, seed=10 + i),
            "input_schema": _schema(200 + i, 4),
        }
        for i, name in enumerate(CLAUDE_TOOLS)
    ]
    reminder = "<system-reminder>\n" + prose(2500, seed=3) + "\n</system-reminder>"
    return {
        "model": "claude-sonnet-5-5",
        "max_tokens": 32000,
        "stream": stream,
        "temperature": 1,
        "system": [
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": prose(10000, seed=1), "cache_control": {"type": "ephemeral"}},
        ],
        "tools": tools,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": reminder},
                    {"type": "text", "text": "Why does the ranking test fail on Postgres?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll run the failing test first."},
                    {
                        "type": "tool_use",
                        "id": "toolu_bench_0001",
                        "name": "Bash",
                        "input": {"command": "pytest -q tests/routing", "timeout": 120000},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_bench_0001",
                        "content": prose(6000, seed=4),
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        "metadata": {"user_id": f"user_{'0' * 64}_account__session_{session}"},
    }


def responses_body(*, stream: bool, session: str) -> dict[str, Any]:
    """A Codex CLI turn's second request (after one shell call), about 50 KB."""
    tools = [
        {
            "type": "function",
            "name": name,
            "description": prose(1500, seed=40 + i),
            "strict": False,
            "parameters": _schema(300 + i, 5),
        }
        for i, name in enumerate(("shell", "apply_patch", "update_plan", "view_image", "read_file"))
    ]
    environment = (
        "<environment_context>\n  <cwd>/srv/project</cwd>\n  <approval_policy>never"
        "</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n"
        "  <network_access>restricted</network_access>\n  <shell>bash</shell>\n"
        "</environment_context>"
    )

    def message(role: str, text: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

    call = {"command": ["bash", "-lc", "pytest -q tests/routing"], "timeout_ms": 120000}
    return {
        "model": "gpt-5.5-codex",
        "instructions": prose(27000, seed=2),
        "input": [
            message("user", "# AGENTS.md instructions\n\n" + prose(3000, seed=5)),
            message("user", environment),
            message("user", "Why does the ranking test fail on Postgres?"),
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps(call),
                "call_id": "call_bench_0001",
            },
            {
                "type": "function_call_output",
                "call_id": "call_bench_0001",
                "output": json.dumps({"output": prose(6000, seed=6), "metadata": {"exit_code": 1}}),
            },
        ],
        "tools": tools,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": session,
    }


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def session_id() -> str:
    return str(uuid.uuid4())
