"""Run a real agent server subprocess (`python -m agent_server --uds ...`) for end-to-end
tests, on its own Unix socket as the local runtime runs it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from simulator.process import ChildStartError, ListeningProcess
from tests.procs import descendants_of

REPO = Path(__file__).resolve().parents[2]
# agent_server/forwarder.py's start line in the sandbox.
FORWARDER_SOCKET_LINE = re.compile(r"forwarder listening on unix:(\S+) ")


class AgentServerStartError(ChildStartError):
    """The server exited or stayed silent before it was ready."""


def agent_env(*, simulator_url: str, home: Path, secret: str, **extra: str) -> dict[str, str]:
    """A minimal server environment: nothing inherited that could carry a real credential."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "TRINITY_AGENT_SECRET": secret,
        "TRINITY_AGENT_HOME": str(home),
        "ANTHROPIC_BASE_URL": simulator_url,
    }
    env.update(extra)
    return env


class AgentServer(ListeningProcess):
    """One agent server on a Unix socket in a fresh 0700 directory (short, under the
    system's temp dir: a socket path must fit in 107 bytes); stdout and stderr are
    captured."""

    banner = "agent server"
    start_error = AgentServerStartError

    def __init__(
        self,
        *,
        env: dict[str, str],
        log_path: Path,
        log_level: str = "info",
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=15.0, log_path=log_path)
        self.env = env
        self.log_level = log_level
        self.client: httpx.Client | None = None
        self.socket_dir = Path(tempfile.mkdtemp(prefix="agent-"))  # 0700
        self.socket_path = self.socket_dir / "server.sock"

    @property
    def pid(self) -> int:
        pid = super().pid
        assert pid is not None
        return pid

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "agent_server",
            "--uds",
            str(self.socket_path),
            "--log-level",
            self.log_level,
        ]

    def environment(self) -> dict[str, str]:
        return self.env

    def await_ready(self, deadline: float) -> None:
        assert self.base_url == f"unix://{self.socket_path}", self.base_url
        self.client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket_path)),
            base_url="http://agent-server",
            headers={"Authorization": f"Bearer {self.env['TRINITY_AGENT_SECRET']}"},
            timeout=httpx.Timeout(90.0, connect=5.0),
        )
        self.client.get("/health").raise_for_status()

    def exit_detail(self) -> str:
        return f": {self.log_text()[-2000:]}"

    def release(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    def post(self, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.post(path, json=body, **kwargs)

    def children(self) -> list[int]:
        """Live processes below the server, nearest first: the CLI, or in the sandbox
        bwrap first and the CLI below it."""
        assert self.pid is not None
        return [child.pid for child in descendants_of(self.pid) if child.state != "Z"]

    def await_child(self, within: float = 20.0) -> int:
        """The first CLI child to appear; polls /proc for it, bounded by `within`."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            kids = self.children()
            if kids:
                return kids[0]
            time.sleep(0.02)  # polling for a process to appear, not for time to pass
        raise AssertionError("no CLI child appeared")

    def forwarder_socket(self) -> Path | None:
        """The Unix socket its forwarder listens on when the CLI runs in the sandbox
        (as the server logged it), else None: then it listens on loopback TCP."""
        found = FORWARDER_SOCKET_LINE.search(self.log_text())
        return Path(found.group(1)) if found else None

    def forwarder_post(self, cli_base_url: str, path: str, **kwargs: Any) -> httpx.Response:
        """POST to its forwarder from outside, as the CLI would from inside: over the
        Unix socket in the sandbox (the CLI's base URL is the sandbox's relay, which
        only exists inside it), else at the CLI's base URL."""
        socket_path = self.forwarder_socket()
        if socket_path is None:
            return httpx.post(cli_base_url + path, **kwargs)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))) as client:
            return client.post("http://forwarder" + path, **kwargs)

    def log_text(self) -> str:
        if self._log is not None:
            self._log.flush()
        assert self.log_path is not None
        return self.log_path.read_text() if self.log_path.exists() else ""


def turn(**changes: Any) -> dict[str, Any]:
    """A /api/task body (a fresh execution id, "say hi", 60 s) with ``changes``."""
    body: dict[str, Any] = {
        "execution_id": str(uuid.uuid4()),
        "message": "say hi",
        "timeout_seconds": 60,
    }
    body.update(changes)
    return body


def files_holding(root: Path, needle: str) -> list[Path]:
    """The regular files below ``root`` whose bytes contain ``needle`` (a canary)."""
    found = []
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
                found.append(path)
    return found
