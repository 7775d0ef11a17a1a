"""Run a real agent server subprocess (`python -m agent_server`) for end-to-end tests."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"^agent server listening on (?P<url>http://\S+)$")


class AgentServerStartError(RuntimeError):
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


class AgentServer:
    """One agent server on a free loopback port; stdout and stderr are captured."""

    def __init__(
        self,
        *,
        env: dict[str, str],
        log_path: Path,
        log_level: str = "info",
        startup_timeout: float = 30.0,
    ) -> None:
        self.env = env
        self.log_path = log_path
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.stdout_lines: list[str] = []
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._pump: threading.Thread | None = None
        self.base_url = ""
        self.client: httpx.Client | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def start(self) -> AgentServer:
        deadline = time.monotonic() + self.startup_timeout
        self._log = self.log_path.open("a")
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent_server",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                self.log_level,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env,
            cwd=REPO,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        assert self._proc.stdout is not None
        self._pump = threading.Thread(
            target=self._drain, args=(self._proc.stdout, lines), daemon=True
        )
        self._pump.start()
        try:
            self.base_url = self._await_listening(lines, deadline)
            self.client = httpx.Client(
                base_url=self.base_url,
                headers={"Authorization": f"Bearer {self.env['TRINITY_AGENT_SECRET']}"},
                timeout=httpx.Timeout(90.0, connect=5.0),
            )
            self.client.get("/health").raise_for_status()
        except BaseException:
            self.stop()
            raise
        return self

    def _drain(self, stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            self.stdout_lines.append(line)
            lines.put(line)
        lines.put(None)

    def _await_listening(self, lines: queue.Queue[str | None], deadline: float) -> str:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                raise AgentServerStartError(f"agent server exited: {self.log_text()[-2000:]}")
            match = LISTENING.match(line.strip())
            if match:
                return match.group("url")
        raise AgentServerStartError("agent server did not print its address in time")

    def post(self, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.post(path, json=body, **kwargs)

    def children(self) -> list[int]:
        """Live child processes of the server (the CLI runs as a direct child)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[-1].split()
            if int(fields[1]) == self.pid and fields[0] != "Z":
                found.append(int(entry.name))
        return found

    def await_child(self, within: float = 20.0) -> int:
        """The first CLI child to appear; polls /proc for it, bounded by `within`."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            kids = self.children()
            if kids:
                return kids[0]
            time.sleep(0.02)  # polling for a process to appear, not for time to pass
        raise AssertionError("no CLI child appeared")

    def log_text(self) -> str:
        if self._log is not None:
            self._log.flush()
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if self._pump is not None:
                self._pump.join(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
