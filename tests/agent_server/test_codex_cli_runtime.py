"""The Codex runtime: reading `codex exec --json`, its command line, its home, and the
credential swap. The event rows are what the real CLI (0.169.0) printed against a
local upstream; the CLI itself runs in test_codex_e2e.py."""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_server.contract import AppliedOverride
from agent_server.credentials import (
    CODEX,
    codex_capability_env,
    codex_turn_credential,
    token_account_id,
)
from agent_server.errors import TurnError
from agent_server.runtimes.codex_cli import (
    CodexCliRuntime,
    CodexEvents,
    cli_env,
    interpret_codex_exit,
    parse_events,
)
from agent_server.runtimes.codex_home import ThreadRecord, ThreadStore, codex_home_prepare
from agent_server.runtimes.process import Finished
from agent_server.upstream import UpstreamRefusal, UpstreamSeen

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
THREAD = "01a236ee-4687-75f0-93a0-5c670a157c5e"


def lines(*events: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(e) for e in events).encode()


def served(text: str = "Simulated reply", usage: tuple[int, int] = (100, 7)) -> bytes:
    return lines(
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": text}},
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": usage[0],
                "cached_input_tokens": 0,
                "cache_write_input_tokens": 0,
                "output_tokens": usage[1],
                "reasoning_output_tokens": 0,
            },
        },
    )


def failed(message: str) -> bytes:
    return lines(
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "turn.started"},
        {"type": "error", "message": message},
        {"type": "turn.failed", "error": {"message": message}},
    )


def interpret(
    stdout: bytes,
    *,
    returncode: int = 0,
    previous: ThreadRecord | None = None,
    upstream: UpstreamSeen | None = None,
) -> Any:
    return interpret_codex_exit(
        Finished(returncode=returncode, stdout=stdout, stderr=b"some stderr"),
        parse_events(stdout),
        model="gpt-5.5-codex",
        previous=previous,
        upstream=upstream,
        now=NOW,
    )


def test_a_served_turn_becomes_the_answer() -> None:
    outcome = interpret(served())
    assert (outcome.response, outcome.model) == ("Simulated reply", "gpt-5.5-codex")
    assert (outcome.input_tokens, outcome.output_tokens, outcome.cost_usd) == (100, 7, None)


def test_the_last_agent_message_is_the_answer_and_an_error_item_is_no_failure() -> None:
    stdout = lines(
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "item.completed", "item": {"type": "error", "message": "Model metadata…"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Looking…"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Done."}},
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
    )
    assert interpret(stdout).response == "Done."


def test_a_resumed_turn_counts_only_its_own_tokens() -> None:
    # the CLI reports the thread's running total (seen: 100/7, then 200/14, 300/21)
    previous = ThreadRecord(THREAD, input_tokens=200, output_tokens=14)
    outcome = interpret(served(usage=(300, 21)), previous=previous)
    assert (outcome.input_tokens, outcome.output_tokens) == (100, 7)


def test_a_total_below_the_record_is_taken_as_it_is() -> None:
    # another thread than the record's, or a record the CLI's history no longer backs
    previous = ThreadRecord(THREAD, input_tokens=900, output_tokens=90)
    assert interpret(served(usage=(100, 7)), previous=previous).input_tokens == 100


def test_a_killed_cli_is_runtime_killed_before_its_output_is_read() -> None:
    with pytest.raises(TurnError) as caught:
        interpret(failed("unexpected status 401 Unauthorized"), returncode=-9)
    assert caught.value.error_code == "runtime_killed"
    assert "SIGKILL" in caught.value.detail


def test_a_failure_is_classified_from_the_kept_answer_with_its_reset_and_window() -> None:
    reset = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
    kept = UpstreamRefusal(
        status=429,
        received_at=NOW,
        error_type="usage_limit_reached",
        message="The usage limit has been reached",
        resets_at=reset,
        headers={
            "x-codex-secondary-used-percent": "100",
            "x-codex-secondary-window-minutes": "300",
            "x-codex-secondary-reset-at": str(int(reset.timestamp())),
        },
    )
    with pytest.raises(TurnError) as caught:
        interpret(
            failed("You’ve hit your usage limit. Try again later."),
            returncode=1,
            upstream=UpstreamSeen(refusal=kept, requests=1),
        )
    error = caught.value
    assert (error.error_code, error.resets_at, error.limiting_window) == (
        "rate_limit",
        reset,
        "five_hour",
    )
    assert error.detail.startswith("You’ve hit your usage limit.")
    assert "usage_limit_reached" in error.detail


def test_a_failure_before_any_request_is_a_container_fault_never_auth() -> None:
    with pytest.raises(TurnError) as caught:
        interpret(
            failed("unexpected status 401 Unauthorized: missing key"),
            returncode=1,
            upstream=UpstreamSeen(requests=0),
        )
    assert caught.value.error_code == "container_fault"


@pytest.mark.parametrize(
    ("stdout", "returncode"),
    [
        (b"", 1),
        (b"Error: thread/resume failed: no rollout found", 1),
        (lines({"type": "thread.started", "thread_id": THREAD}), 0),  # no turn.completed
        (served(), 2),  # a finished turn, then a non-zero exit
    ],
)
def test_output_that_is_no_finished_turn_is_a_container_fault(
    stdout: bytes, returncode: int
) -> None:
    with pytest.raises(TurnError) as caught:
        interpret(stdout, returncode=returncode)
    assert caught.value.error_code == "container_fault"


def test_the_command_line_names_the_model_resumes_a_thread_and_reads_stdin() -> None:
    runtime = CodexCliRuntime(binary="/opt/codex", clock=lambda: NOW, threads_dir=Path("/x"))
    assert runtime.argv("gpt-5.5", None) == [
        "/opt/codex", "exec", "--strict-config", "--json", "--skip-git-repo-check",
        "-m", "gpt-5.5", "-",
    ]  # fmt: skip
    assert runtime.argv("gpt-5.5", ThreadRecord(THREAD))[-3:] == ["resume", THREAD, "-"]


def test_the_cli_env_points_every_proxy_at_a_dead_port_but_loopback() -> None:
    env = cli_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "PATH": "/bin"}, Path("/h/.codex"))
    assert env["CODEX_HOME"] == "/h/.codex"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "https_proxy"):
        assert env[name] == "http://127.0.0.1:9"
    assert "127.0.0.1" in env["NO_PROXY"]
    assert "OPENAI_BASE_URL" not in env


def test_the_home_is_refused_when_the_agent_planted_a_symlink(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    (home / ".codex").symlink_to(elsewhere)
    with pytest.raises(OSError):
        codex_home_prepare(home, None, "model = 'x'\n")
    assert list(elsewhere.iterdir()) == []


def test_the_config_replaces_a_planted_file_without_writing_through_it(tmp_path: Path) -> None:
    home, target = tmp_path / "home", tmp_path / "target"
    (home / ".codex").mkdir(parents=True)
    target.write_text("untouched")
    (home / ".codex" / "config.toml").symlink_to(target)
    codex = codex_home_prepare(home, None, 'model = "gpt-5.5-codex"\n')
    assert target.read_text() == "untouched"
    config = codex / "config.toml"
    assert not config.is_symlink()
    assert config.read_text() == 'model = "gpt-5.5-codex"\n'
    assert oct(os.stat(config).st_mode & 0o777) == "0o644"


def test_a_sessions_thread_is_kept_across_store_instances(tmp_path: Path) -> None:
    ThreadStore(tmp_path / "threads").save("s1", ThreadRecord(THREAD, 200, 14))
    assert ThreadStore(tmp_path / "threads").load("s1") == ThreadRecord(THREAD, 200, 14)
    assert ThreadStore(tmp_path / "threads").load("s2") is None
    assert oct((tmp_path / "threads").stat().st_mode & 0o777) == "0o700"


def jwt(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJub25lIn0.{payload}.sig"


@pytest.mark.parametrize(
    ("token", "account"),
    [
        (jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-9"}}), "acct-9"),
        (jwt({"sub": "x"}), None),
        ("not-a-jwt", None),
        ("a.!!!.c", None),
    ],
)
def test_a_plan_tokens_account_is_read_from_its_claim(token: str, account: str | None) -> None:
    assert token_account_id(token) == account


def test_a_plan_beats_a_key_and_the_explicit_account_beats_the_claim() -> None:
    token = jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-claim"}})
    env = {"CODEX_ACCESS_TOKEN": token, "CODEX_ACCOUNT_ID": "acct-set", "OPENAI_API_KEY": "k"}
    credential = codex_turn_credential(env)
    assert credential is not None
    assert (credential.shape, credential.account_id) == ("codex-plan", "acct-set")
    assert codex_turn_credential({"OPENAI_API_KEY": "sk-1"}).shape == "openai-key"  # type: ignore[union-attr]
    assert codex_turn_credential({}) is None


def test_the_cli_env_holds_the_capability_and_no_credential_of_either_family() -> None:
    env = {
        "CODEX_ACCESS_TOKEN": "plan",
        "CODEX_ACCOUNT_ID": "acct",
        "OPENAI_API_KEY": "key",
        "CODEX_API_KEY": "would-override-everything",
        "CLAUDE_CODE_OAUTH_TOKEN": "claude",
        "PATH": "/bin",
    }
    cli = codex_capability_env(env, "trinity-cap-x", "OPENAI_API_KEY", "http://127.0.0.1:5")
    assert cli == {
        "OPENAI_API_KEY": "trinity-cap-x",
        "OPENAI_BASE_URL": "http://127.0.0.1:5/v1",
        "PATH": "/bin",
    }


@pytest.mark.parametrize(
    ("kind", "extra", "drop"),
    [
        (
            "oauth_token",
            {"CODEX_ACCESS_TOKEN": "s", "CODEX_ACCOUNT_ID": None},
            {"OPENAI_API_KEY"},
        ),
        ("api_key", {"OPENAI_API_KEY": "s"}, {"CODEX_ACCESS_TOKEN", "CODEX_ACCOUNT_ID"}),
    ],
)
def test_an_override_is_the_one_codex_credential_of_its_spawn(
    kind: Any, extra: dict[str, str | None], drop: set[str]
) -> None:
    assert CODEX.override_layers(AppliedOverride(kind=kind, secret="s")) == (extra, drop)


def test_events_that_are_not_json_are_skipped() -> None:
    stdout = b"WARNING: something\n" + served()
    assert parse_events(stdout).thread_id == THREAD
    assert parse_events(b"") == CodexEvents()
