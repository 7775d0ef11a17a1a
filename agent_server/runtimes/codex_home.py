"""The Codex CLI's home per spawn, and which CLI thread each chat session resumes.

`CODEX_HOME` is `<spawn HOME>/.codex`. Its `config.toml` is written by the server
before every spawn: the one provider it names is the forwarder (API-key mode, the
capability as `OPENAI_API_KEY`), and everything that would phone out (update
checks, analytics, feedback, telemetry export, the plugin marketplace) is off. It
holds no credential, so the agent may read it; it may even change it, for the rest
of its own turn only.

The spawn HOME belongs to the agent user, so the server writes into it through
file descriptors that never follow a symlink the agent planted (`O_NOFOLLOW` on
each step, the file created afresh with `O_EXCL`).

The Codex CLI names its own threads, so a chat session's thread id is kept in the
server's own directory (`<TRINITY_AGENT_HOME>/codex-threads/<session uuid>.json`,
0700, out of the agent's reach), with the thread's token totals: `codex exec
resume` reports the thread's cumulative usage, and a turn's own is the difference.
It survives a restart of the server; the thread's history itself lives in the
session's CODEX_HOME (`sessions/…/rollout-*-<thread id>.jsonl`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_server.isolation import AgentUser, own_dir

PROVIDER_ID: Final = "trinity"
# Two retries of a refused request, one of a broken stream: at most 6 requests. The
# CLI's defaults (4 and 5) multiply: a 5xx took 30 requests and 24 s of the turn's
# budget before it was reported. A usage limit is never retried.
REQUEST_RETRIES: Final = 2
STREAM_RETRIES: Final = 1
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def codex_config(*, forwarder_v1: str, model: str, sandboxed: bool = False) -> str:
    """The config.toml of one spawn (TOML; strings written as JSON strings, which
    TOML reads alike).

    `sandboxed`: the CLI runs in the agent server's sandbox (agent_server/sandbox.py)
    or in the agent's own container, which is the boundary for everything it runs, as
    it is for the Claude Code CLI's tools; the CLI's own command sandbox is then off.
    Nested, it works only where its helper links may be made (never under the system
    temp dir, where the default work root is) and where the agent's user may create
    user namespaces; outside both it stays on (its default, read-only).
    """
    own_sandbox = ['sandbox_mode = "danger-full-access"'] if sandboxed else []
    return "\n".join(
        [
            f"model_provider = {json.dumps(PROVIDER_ID)}",
            f"model = {json.dumps(model)}",
            *own_sandbox,
            "check_for_update_on_startup = false",
            "",
            f"[model_providers.{PROVIDER_ID}]",
            f"name = {json.dumps(PROVIDER_ID)}",
            f"base_url = {json.dumps(forwarder_v1)}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "supports_websockets = false",
            f"request_max_retries = {REQUEST_RETRIES}",
            f"stream_max_retries = {STREAM_RETRIES}",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
            "",
            "[otel]",
            'exporter = "none"',
            "",
            # The plugin marketplace (github.com, chatgpt.com) is fetched otherwise.
            "[features]",
            "plugins = false",
            "",
        ]
    )


def codex_home_prepare(home: Path, user: AgentUser | None, config: str) -> Path:
    """`<home>/.codex`, the agent's, with `config` as its config.toml (0644, rewritten).

    Raises OSError when `.codex` is not a directory (a symlink or file the agent
    put there).
    """
    home_fd = os.open(home, _DIR_FLAGS)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(".codex", 0o700, dir_fd=home_fd)
        codex_fd = os.open(".codex", _DIR_FLAGS, dir_fd=home_fd)
        try:
            if user is not None:
                os.fchown(codex_fd, user.uid, user.gid)
            with contextlib.suppress(FileNotFoundError):
                os.unlink("config.toml", dir_fd=codex_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            file_fd = os.open("config.toml", flags, 0o644, dir_fd=codex_fd)
            os.fchmod(file_fd, 0o644)  # the server's own umask may be stricter
            with os.fdopen(file_fd, "w", encoding="utf-8") as out:
                out.write(config)
        finally:
            os.close(codex_fd)
    finally:
        os.close(home_fd)
    return home / ".codex"


def rollout_exists(codex_home: Path, thread_id: str) -> bool:
    """Whether the CLI still has the thread's history (it refuses to resume without)."""
    return any((codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))


@dataclass(frozen=True)
class ThreadRecord:
    """A chat session's Codex thread and the token totals the CLI last reported."""

    thread_id: str
    input_tokens: int = 0
    output_tokens: int = 0


class ThreadStore:
    """Session id → ThreadRecord, one small JSON file each in a server-owned dir."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, session_key: str) -> Path:
        return self.root / f"{session_key}.json"

    def load(self, session_key: str) -> ThreadRecord | None:
        try:
            raw = json.loads(self._path(session_key).read_text(encoding="utf-8"))
            return ThreadRecord(
                thread_id=str(raw["thread_id"]),
                input_tokens=int(raw.get("input_tokens", 0)),
                output_tokens=int(raw.get("output_tokens", 0)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, session_key: str, record: ThreadRecord) -> None:
        own_dir(self.root, mode=0o700)
        tmp = self.root / f".{session_key}.{secrets.token_hex(4)}.tmp"
        tmp.write_text(json.dumps(record.__dict__), encoding="utf-8")
        os.replace(tmp, self._path(session_key))
