"""The Claude Code CLI runtime: one `claude -p --output-format stream-json` process
per turn.

Every turn, streamed or not, runs with `--output-format stream-json --verbose
--include-partial-messages`: one JSON line per step as it happens (text deltas,
tool calls, tool results; `claude_events.py` reads them as events) and last the
same result object `--output-format json` prints, which decides the answer. The
pinned CLI (agent_server/package.json) has the partial-messages flag; the line
reader also takes text from whole messages, should a CLI stream none.

The message goes to the CLI on stdin, not as an argv word: a single argv string is
capped at 128 KiB on Linux (E2BIG), a message starting with `-` would be read as a
flag, and argv is visible to every user in `ps`. The CLI reads its prompt from stdin
in print mode; `claude -p <message>` behaves the same otherwise.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_server.classifier import classify_runtime_refusal
from agent_server.errors import TurnError
from agent_server.isolation import AgentUser
from agent_server.runtimes.base import Clock, Turn, TurnOutcome, session_uuid
from agent_server.runtimes.claude_events import claude_line_events, is_result
from agent_server.runtimes.events import EVENT_LINE_BYTES, EventBounds, json_object
from agent_server.runtimes.process import CliProcesses, excerpt, killed_error
from agent_server.sandbox import Sandbox

logger = logging.getLogger(__name__)

LABEL = "the Claude Code CLI"
STREAM_FLAGS = ("--output-format", "stream-json", "--verbose", "--include-partial-messages")
_CONTEXT_SUFFIX = re.compile(r"\[[^\]]*\]$")


class ClaudeCodeRuntime:
    name = "claude-code"
    # Agent code (the CLI's tools) runs in the child: it gets a forwarder capability.
    uses_forwarder = True

    def __init__(
        self,
        *,
        binary: str,
        clock: Clock,
        run_as: AgentUser | None = None,
        allowed_tools: tuple[str, ...] = (),
        sandbox: Sandbox | None = None,
    ) -> None:
        self.binary = binary
        self.clock = clock
        # Separate-user mode: the CLI and every tool it starts run as this user, with
        # no supplementary groups and a umask that keeps their files to themselves.
        self.run_as = run_as
        self.allowed_tools = allowed_tools
        self._processes = CliProcesses(label=LABEL, run_as=run_as, sandbox=sandbox)

    def argv(self, turn: Turn, env: Mapping[str, str]) -> list[str]:
        """The CLI command line for `turn` (the message itself goes on stdin).

        A chat turn names its session: `--resume` when the session's transcript
        already exists under the spawn HOME, else `--session-id` to create it (the CLI
        refuses `--session-id` for an id in use and `--resume` for an unknown one).
        The agent's allowed tools go as `--allowedTools` (print mode denies every tool
        that needs approval otherwise).
        """
        argv = [self.binary, "-p", *STREAM_FLAGS]
        if self.allowed_tools:
            # One comma-joined word: the flag is variadic and would swallow what follows.
            argv += ["--allowedTools", ",".join(self.allowed_tools)]
        if turn.model:
            argv += ["--model", turn.model]
        if turn.session_id is not None:
            sid = str(session_uuid(turn.session_id))
            flag = "--resume" if _transcript_exists(turn.home, env, sid) else "--session-id"
            argv += [flag, sid]
        return argv

    async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
        reader = _Lines(turn.events)
        finished = await self._processes.run_turn(self.argv(turn, env), turn, env, reader.line)
        return interpret_cli_exit(
            returncode=finished.returncode,
            # The result line when the CLI printed one, else what it printed last.
            stdout=reader.result or finished.stdout,
            stderr=finished.stderr,
            requested_model=turn.model,
            now=self.clock(),
        )

    async def aclose(self) -> None:
        self._processes.kill_all()


class _Lines:
    """One spawn's stdout lines: the last result line kept, the rest as events."""

    def __init__(self, events: EventBounds | None) -> None:
        self.events = events
        self.result: bytes | None = None
        self._streamed: set[str] = set()

    def line(self, raw: bytes) -> None:
        parsed = json_object(raw)
        if parsed is None:
            return
        if is_result(parsed):
            self.result = raw
        elif self.events is not None and not self.events.stopped:
            if len(raw) <= EVENT_LINE_BYTES:
                self.events.take(claude_line_events(parsed, self._streamed))


def _transcript_exists(home: Path, env: Mapping[str, str], sid: str) -> bool:
    config_dir = (
        Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    )
    return any((config_dir / "projects").glob(f"*/{sid}.jsonl"))


def interpret_cli_exit(
    *,
    returncode: int,
    stdout: bytes,
    stderr: bytes,
    requested_model: str | None,
    now: datetime,
) -> TurnOutcome:
    """Turn a finished CLI process into an answer, or raise the typed `TurnError`.

    Order matters: a signal death is `runtime_killed` before anything is parsed (a
    kill says nothing about the credential); then the JSON result decides; output
    that is not a result is a `container_fault`.
    """
    if returncode < 0 and (killed := killed_error(LABEL, returncode)) is not None:
        raise killed
    result = _parse_result(stdout)
    if result is None:
        # A wrapper script reports its child's signal death as 128+N.
        if (killed := killed_error(LABEL, returncode)) is not None:
            raise killed
        raise TurnError(
            "container_fault",
            f"the Claude Code CLI exited with status {returncode} without a JSON result: "
            f"{excerpt(stderr) or excerpt(stdout) or '(no output)'}",
        )
    text = result.get("result")
    text = text if isinstance(text, str) else ""
    if result.get("is_error"):
        status = result.get("api_error_status")
        refusal = classify_runtime_refusal(
            api_error_status=status if isinstance(status, int) else None,
            text=text,
            now=now,
        )
        detail = text or f"the Claude Code CLI reported an error ({result.get('subtype')})"
        raise TurnError(refusal.error_code, detail, refusal.resets_at)
    if returncode != 0:
        raise TurnError(
            "container_fault",
            f"the Claude Code CLI exited with status {returncode} after a non-error result: "
            f"{excerpt(stderr) or '(no stderr)'}",
        )
    raw_usage = result.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    cost = result.get("total_cost_usd")
    return TurnOutcome(
        response=text,
        model=_served_model(result.get("modelUsage"), requested_model),
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
    )


def _parse_result(stdout: bytes) -> dict[str, Any] | None:
    """The CLI's result object: the whole stdout, else its last JSON line."""
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    for candidate in (text, *reversed(text.splitlines())):
        try:
            parsed = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(parsed, dict) and ("is_error" in parsed or parsed.get("type") == "result"):
            return parsed
    return None


def _served_model(model_usage: object, requested: str | None) -> str:
    """The model that produced most of the output, per the CLI's `modelUsage`.

    The CLI labels a model with its context window (`claude-opus-4-8[1m]`); the
    suffix is not part of the model id that was sent, so it is dropped.
    """
    if isinstance(model_usage, dict) and model_usage:

        def weight(item: tuple[str, Any]) -> tuple[int, int]:
            stats = item[1] if isinstance(item[1], dict) else {}
            return _int(stats.get("outputTokens")), _int(stats.get("inputTokens"))

        name = max(model_usage.items(), key=weight)[0]
        return _CONTEXT_SUFFIX.sub("", str(name))
    return requested or ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
