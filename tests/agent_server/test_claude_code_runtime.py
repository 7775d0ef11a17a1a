"""The CLI runtime: reading the CLI's result, its command line, and bounding its process.

The result rows are the JSON the real CLI (2.1.332) printed against a local upstream;
the process tests use tiny scripts in place of the CLI, because what they pin is the
server's handling of a process (timeouts, signals, a missing binary), which the real
CLI cannot be made to exhibit on demand. test_e2e.py pins the same paths with the
real CLI where it can.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_server.errors import TurnError
from agent_server.runtimes.base import Turn, session_uuid
from agent_server.runtimes.claude_code import (
    STREAM_FLAGS,
    ClaudeCodeRuntime,
    interpret_cli_exit,
)

NOW = datetime(2026, 11, 30, 3, 25, tzinfo=UTC)


def cli_result(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "api_error_status": None,
        "num_turns": 1,
        "result": "hi there",
        "stop_reason": "end_turn",
        "session_id": "e1b06087-ecc8-4a6c-9c66-9daa85c8cb32",
        "total_cost_usd": 0.000111,
        "usage": {"input_tokens": 12, "output_tokens": 5, "cache_read_input_tokens": 0},
        "modelUsage": {
            "claude-sonnet-5-5": {
                "inputTokens": 12,
                "outputTokens": 5,
                "canonicalModel": "claude-sonnet-5-5",
            }
        },
        "terminal_reason": "completed",
    }
    base.update(fields)
    return json.dumps(base).encode()


def refusal(status: int | None, text: str, api_error: str | None = None) -> bytes:
    return cli_result(
        is_error=True,
        api_error_status=status,
        api_error=api_error,
        terminal_reason="api_error",
        result=text,
        total_cost_usd=0,
        usage={"input_tokens": 0, "output_tokens": 0},
        modelUsage={},
        stop_reason="stop_sequence",
    )


def test_a_successful_result_becomes_the_answer() -> None:
    outcome = interpret_cli_exit(
        returncode=0, stdout=cli_result(), stderr=b"", requested_model=None, now=NOW
    )
    assert outcome.response == "hi there"
    assert outcome.model == "claude-sonnet-5-5"
    assert (outcome.input_tokens, outcome.output_tokens) == (12, 5)
    assert outcome.cost_usd == pytest.approx(0.000111)


def test_the_served_model_drops_the_context_window_label() -> None:
    usage = {"claude-opus-4-8[1m]": {"inputTokens": 12, "outputTokens": 5}}
    outcome = interpret_cli_exit(
        returncode=0,
        stdout=cli_result(modelUsage=usage),
        stderr=b"",
        requested_model=None,
        now=NOW,
    )
    assert outcome.model == "claude-opus-4-8"


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "code"),
    [
        (
            1,
            refusal(
                429, "You've hit your 5-hour limit · resets 12:21pm (UTC)", "usage_limit_reached"
            ),
            b"",
            "rate_limit",
        ),
        # the sentence alone still says it (2.1.197 said "session limit")
        (
            1,
            refusal(None, "You've hit your 5-hour limit · resets 12:21pm (UTC)"),
            b"",
            "rate_limit",
        ),
        (1, refusal(429, "You've hit your session limit · resets 6:25am (UTC)"), b"", "rate_limit"),
        (
            1,
            refusal(429, "You've hit your weekly limit · resets Dec 3, 3:25am (UTC)"),
            b"",
            "rate_limit",
        ),
        (
            1,
            refusal(401, "Failed to authenticate. API Error: 401 OAuth token has been revoked."),
            b"",
            "auth",
        ),
        (1, refusal(401, "Not logged in · Please run /login"), b"", "auth"),
        (1, refusal(400, "Credit balance is too low"), b"", "auth"),
        (
            1,
            refusal(404, "There's an issue with the selected model (claude-nope-1)."),
            b"",
            "model_unsupported",
        ),
        # a signal death is a kill before anything else, even with auth-looking text
        (-9, refusal(401, "Failed to authenticate"), b"", "runtime_killed"),
        (-int(signal.SIGTERM), b"", b"", "runtime_killed"),
        (137, b"", b"Killed", "runtime_killed"),
        # no result at all
        (1, b"", b"No conversation found with session ID: x", "container_fault"),
        (0, b"not json", b"", "container_fault"),
        (0, b'{"unrelated": true}', b"", "container_fault"),
        (2, cli_result(), b"", "container_fault"),
    ],
)
def test_it_maps_each_cli_exit_to_a_typed_error(
    returncode: int, stdout: bytes, stderr: bytes, code: str
) -> None:
    with pytest.raises(TurnError) as caught:
        interpret_cli_exit(
            returncode=returncode, stdout=stdout, stderr=stderr, requested_model=None, now=NOW
        )
    assert caught.value.error_code == code


def test_a_usage_limit_carries_its_reset() -> None:
    with pytest.raises(TurnError) as caught:
        interpret_cli_exit(
            returncode=1,
            stdout=refusal(429, "You've hit your 5-hour limit · resets 6:25am (UTC)"),
            stderr=b"",
            requested_model=None,
            now=NOW,
        )
    assert caught.value.resets_at == datetime(2026, 11, 30, 6, 25, tzinfo=UTC)
    assert caught.value.status_code == 429


def test_a_fault_detail_quotes_the_end_of_stderr() -> None:
    with pytest.raises(TurnError) as caught:
        interpret_cli_exit(
            returncode=1,
            stdout=b"",
            stderr=b"x" * 5000 + b"Error: Invalid session ID.",
            requested_model=None,
            now=NOW,
        )
    assert caught.value.detail.endswith("Error: Invalid session ID.")
    assert len(caught.value.detail) < 800


def make_turn(tmp_path: Path, **changes: Any) -> Turn:
    values: dict[str, Any] = {
        "execution_id": "exec-1",
        "message": "--help is not a flag here",
        "model": None,
        "timeout_seconds": 10.0,
        "home": tmp_path / "home",
        "cwd": tmp_path,
    }
    values.update(changes)
    values["home"].mkdir(exist_ok=True)
    return Turn(**values)


def test_the_command_line_names_model_and_session_but_never_the_message(tmp_path: Path) -> None:
    runtime = ClaudeCodeRuntime(binary="claude", clock=lambda: NOW)
    turn = make_turn(tmp_path, model="claude-opus-4-8", session_id="chat-1")
    sid = str(session_uuid("chat-1"))
    first = runtime.argv(turn, {})
    transcript = turn.home / ".claude" / "projects" / "-agent" / f"{sid}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("{}\n")
    second = runtime.argv(turn, {})
    base = ["claude", "-p", *STREAM_FLAGS, "--model", "claude-opus-4-8"]
    assert first == [*base, "--session-id", sid]
    assert second == [*base, "--resume", sid]
    assert runtime.argv(make_turn(tmp_path), {}) == ["claude", "-p", *STREAM_FLAGS]


def test_every_turn_streams_json_lines_with_partial_messages() -> None:
    assert STREAM_FLAGS == (
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    )


def test_allowed_tools_go_to_the_command_line_as_one_word(tmp_path: Path) -> None:
    runtime = ClaudeCodeRuntime(binary="claude", clock=lambda: NOW, allowed_tools=("Read", "Bash"))
    argv = runtime.argv(make_turn(tmp_path, model="claude-opus-4-8"), {})
    assert argv == [
        "claude",
        "-p",
        *STREAM_FLAGS,
        "--allowedTools",
        "Read,Bash",
        "--model",
        "claude-opus-4-8",
    ]


def test_a_session_id_maps_to_a_stable_uuid() -> None:
    given = "11111111-2222-4333-8444-555555555555"
    assert str(session_uuid(given)) == given
    assert session_uuid("chat-1") == session_uuid("chat-1") != session_uuid("chat-2")
    assert isinstance(session_uuid("chat-1"), uuid.UUID)


def write_script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def run(runtime: ClaudeCodeRuntime, turn: Turn) -> Any:
    return asyncio.run(runtime.run(turn, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}))


def test_a_missing_binary_is_a_container_fault(tmp_path: Path) -> None:
    runtime = ClaudeCodeRuntime(binary=str(tmp_path / "no-such-claude"), clock=lambda: NOW)
    with pytest.raises(TurnError) as caught:
        run(runtime, make_turn(tmp_path))
    assert caught.value.error_code == "container_fault"
    assert "no-such-claude" in caught.value.detail


def test_the_message_reaches_the_cli_on_stdin(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "fake-claude",
        'msg=$(cat)\nprintf \'{"type":"result","is_error":false,"result":"%s"}\' "$msg"\n',
    )
    outcome = run(ClaudeCodeRuntime(binary=script, clock=lambda: NOW), make_turn(tmp_path))
    assert outcome.response == "--help is not a flag here"


def wait_until_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return True  # dead, awaiting its reaper
        time.sleep(0.02)  # polling for the kernel to finish the kill, not for time
    return False


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = write_script(tmp_path / "fake-claude", f"sleep 30 &\necho $! > {pidfile}\nsleep 30\n")
    runtime = ClaudeCodeRuntime(binary=script, clock=lambda: NOW)
    started = time.monotonic()
    with pytest.raises(TurnError) as caught:
        run(runtime, make_turn(tmp_path, timeout_seconds=0.5))
    assert caught.value.error_code == "timeout"
    assert time.monotonic() - started < 5
    assert wait_until_gone(int(pidfile.read_text()))


def test_a_cli_killed_by_a_signal_is_runtime_killed(tmp_path: Path) -> None:
    script = write_script(tmp_path / "fake-claude", "kill -9 $$\n")
    with pytest.raises(TurnError) as caught:
        run(ClaudeCodeRuntime(binary=script, clock=lambda: NOW), make_turn(tmp_path))
    assert caught.value.error_code == "runtime_killed"
    assert "SIGKILL" in caught.value.detail
