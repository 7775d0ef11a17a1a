"""Run the simulator as a child process: ``with SimulatorProcess() as sim: ...``."""

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
from typing import IO

import httpx

from simulator.control import SimulatorControl

LISTENING = re.compile(r"^simulator listening on (?P<url>http://\S+)$")


class SimulatorStartError(RuntimeError):
    """The child exited or stayed silent before it was ready."""


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    # Drain stdout for the child's whole life so a full pipe can never block it.
    for line in stream:
        lines.put(line)
    lines.put(None)


class SimulatorProcess:
    """One simulator subprocess on a free loopback port.

    ``start`` returns once the control API answers, or raises SimulatorStartError
    after ``startup_timeout`` seconds; ``stop`` terminates, then kills after
    ``stop_timeout`` seconds. Logs go to ``log_path`` if given, else to this
    process's stderr.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        log_path: Path | None = None,
        log_level: str = "info",
    ) -> None:
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_path = log_path
        self.log_level = log_level
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[bytes] | None = None
        self._base_url: str | None = None
        self._control: SimulatorControl | None = None
        self._pump: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("simulator not started")
        return self._base_url

    @property
    def control(self) -> SimulatorControl:
        if self._control is None:
            raise RuntimeError("simulator not started")
        return self._control

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> SimulatorProcess:
        deadline = time.monotonic() + self.startup_timeout
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        cmd = [
            sys.executable,
            "-m",
            "simulator",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            self.log_level,
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(
            target=_pump, args=(self._proc.stdout, lines), name="simulator-stdout", daemon=True
        )
        self._pump.start()
        try:
            self._base_url = self._await_listening(lines, deadline)
            self._control = SimulatorControl(self._base_url)
            self._await_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _await_listening(self, lines: queue.Queue[str | None], deadline: float) -> str:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SimulatorStartError("simulator did not print its address in time")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise SimulatorStartError("simulator exited before listening")
            match = LISTENING.match(line.strip())
            if match:
                return match.group("url")

    def _await_ready(self, deadline: float) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise SimulatorStartError("simulator exited during startup")
            try:
                if self.control.health():
                    return
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.05)  # a retry pause while the child starts, not a clock wait
        raise SimulatorStartError(f"simulator not ready in time: {last!r}")

    def stop(self) -> None:
        """Terminate the child, kill it if it lingers, and release its pipes."""
        if self._control is not None:
            self._control.close()
            self._control = None
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=self.stop_timeout)
            # The pump ends at EOF once the child is gone; close the pipe after it.
            if self._pump is not None:
                self._pump.join(timeout=self.stop_timeout)
                self._pump = None
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> SimulatorProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
