"""The real CLIs the tests drive, resolved as the agent server resolves them.

A missing CLI fails the test that needs it, never skips it: those tests are the only
proof that the pinned CLI still behaves as the code reads it.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading

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


# Without these two the CLI calls past any provider it is given (seen with 0.169.0):
# the plugin marketplace (github.com, api.github.com, chatgpt.com; in ChatGPT mode the
# configured chatgpt_base_url instead) and analytics (ab.chatgpt.com).
QUIET = """
[analytics]
enabled = false
[features]
plugins = false
"""


class ProxyTrap:
    """A loopback listener set as every proxy: any request the CLI sends past the
    simulator (NO_PROXY) lands here, is counted, and fails at once."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.requests: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="proxy-trap", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0]
                except OSError:
                    first = b"?"
                # e.g. "CONNECT chatgpt.com:443 HTTP/1.1": where it wanted to go.
                self.requests.append(first.decode(errors="replace"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.server.close()


def search_path() -> str:
    """Node's directory first: the pinned `codex` is a node launcher."""
    node = shutil.which("node")
    dirs = (os.path.dirname(node) if node else None, "/usr/local/bin", "/usr/bin", "/bin")
    return os.pathsep.join(d for d in dirs if d)
