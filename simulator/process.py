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
from typing import IO, ClassVar, Self

import httpx

from simulator.control import SimulatorControl

REPO = Path(__file__).resolve().parent.parent


class ChildStartError(RuntimeError):
    """The child exited or stayed silent before it was ready."""


class SimulatorStartError(ChildStartError):
    pass


class ListeningProcess:
    """A child process that prints one ``<banner> listening on http://HOST:PORT`` line
    once its socket listens, then serves. Used for the simulator here and for agent
    servers in their end-to-end tests.

    ``start`` returns once the line arrived and ``await_ready`` passed, or raises
    ``start_error`` after ``startup_timeout`` seconds; ``stop`` terminates, then kills
    after ``stop_timeout`` seconds. stdout is drained for the child's whole life so a
    full pipe never blocks it; stderr goes to ``log_path`` if given.
    """

    banner: ClassVar[str]
    start_error: ClassVar[type[ChildStartError]] = ChildStartError

    def __init__(
        self, *, startup_timeout: float, stop_timeout: float, log_path: Path | None
    ) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_path = log_path
        self.stdout_lines: list[str] = []
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._base_url: str | None = None

    # What a subclass says about its child.

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def await_ready(self, deadline: float) -> None:
        """Return once the child serves; the default trusts the listening line."""

    def exit_detail(self) -> str:
        """Appended to the error when the child exits during startup."""
        return ""

    def release(self) -> None:
        """Close whatever ``await_ready`` opened; called first by ``stop``."""

    # The shared mechanics.

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError(f"{self.banner} not started")
        return self._base_url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def exited(self) -> bool:
        return self._proc is not None and self._proc.poll() is not None

    def start(self) -> Self:
        deadline = time.monotonic() + self.startup_timeout
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            self.command(),
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.environment(),
            cwd=REPO,
        )
        assert self._proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(
            target=self._drain,
            args=(self._proc.stdout, lines),
            name=f"{self.banner}-stdout",
            daemon=True,
        )
        self._pump.start()
        try:
            self._base_url = self._await_listening(lines, deadline)
            self.await_ready(deadline)
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
        # unix://PATH: an agent server on its own Unix socket (python -m agent_server --uds).
        pattern = re.compile(
            rf"^{re.escape(self.banner)} listening on (?P<url>(?:http|unix)://\S+)$"
        )
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                raise self.start_error(f"{self.banner} exited before listening{self.exit_detail()}")
            match = pattern.match(line.strip())
            if match:
                return match.group("url")
        raise self.start_error(f"{self.banner} did not print its address in time")

    def stop(self) -> None:
        """Terminate the child, kill it if it lingers, and release its pipes."""
        self.release()
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class SimulatorProcess(ListeningProcess):
    """One simulator subprocess on a free loopback port; ready once its control API
    answers. Logs go to ``log_path`` if given, else to this process's stderr."""

    banner = "simulator"
    start_error = SimulatorStartError

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        log_path: Path | None = None,
        log_level: str = "info",
        control_from: tuple[str, ...] = (),
    ) -> None:
        super().__init__(
            startup_timeout=startup_timeout, stop_timeout=stop_timeout, log_path=log_path
        )
        self.host = host
        self.port = port
        self.log_level = log_level
        self.control_from = control_from
        self._control: SimulatorControl | None = None

    @property
    def control(self) -> SimulatorControl:
        if self._control is None:
            raise RuntimeError("simulator not started")
        return self._control

    def command(self) -> list[str]:
        return [
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

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        if self.control_from:
            env["SIMULATOR_CONTROL_FROM"] = ",".join(self.control_from)
        return env

    def await_ready(self, deadline: float) -> None:
        self._control = SimulatorControl(self.base_url)
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.exited():
                raise SimulatorStartError("simulator exited during startup")
            try:
                if self._control.health():
                    return
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.05)  # a retry pause while the child starts, not a clock wait
        raise SimulatorStartError(f"simulator not ready in time: {last!r}")

    def release(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
