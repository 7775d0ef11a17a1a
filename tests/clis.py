"""The real CLIs the tests drive, resolved as the agent server resolves them.

A missing CLI fails the test that needs it, never skips it: those tests are the only
proof that the pinned CLI still behaves as the code reads it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from agent_server.config import resolve_claude_bin, resolve_codex_bin

CLAUDE = resolve_claude_bin(os.environ)
CODEX = resolve_codex_bin(os.environ)


def claude_cli() -> str:
    """The Claude Code CLI (TRINITY_CLAUDE_BIN, else the pinned one), or fail."""
    return _found(CLAUDE, "Claude Code CLI", "npm ci --prefix agent_server", "TRINITY_CLAUDE_BIN")


def codex_cli() -> str:
    """The Codex CLI (TRINITY_CODEX_BIN, else the pinned one), or fail."""
    return _found(CODEX, "Codex CLI", "npm ci --prefix agent_server/codex_cli", "TRINITY_CODEX_BIN")


def _found(binary: str, what: str, install: str, variable: str) -> str:
    found = shutil.which(binary)
    if found is None:
        pytest.fail(f"no {what} at {binary!r}: run `make setup` ({install}) or set {variable}")
    return found
