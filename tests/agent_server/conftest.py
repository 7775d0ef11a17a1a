"""Fixtures for the agent server's end-to-end tests: a real simulator and real servers."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.agent_server.support import AgentServer, agent_env
from tests.conftest import simulator  # noqa: F401 - re-exported: one simulator per package

if TYPE_CHECKING:
    # Imported lazily below, so the unit tests never depend on the simulator package.
    from simulator.process import SimulatorProcess

SECRET = "e2e-agent-secret-7f3a9c"


@pytest.fixture
def sim(simulator: SimulatorProcess) -> SimulatorProcess:
    """The suite's simulator (tests/conftest.py), reset: no credentials, no latency,
    real time, empty log."""
    simulator.control.reset()
    return simulator


StartServer = Callable[..., AgentServer]


@pytest.fixture
def start_server(sim: SimulatorProcess, tmp_path: Path) -> Iterator[StartServer]:
    """Start agent servers for this test; each is stopped at teardown.

    `start_server(dotenv=..., log_level=..., **env)` makes a fresh agent home (the
    server's own directory, under tmp_path) and a fresh work area for the agent user.
    The work area sits directly in the system temp dir: pytest's tmp_path is under a
    0700 directory of the test's user, which the agent user (when the tests run as
    root) could not enter.
    """
    started: list[AgentServer] = []
    areas: list[Path] = []

    def start(*, dotenv: str | None = None, log_level: str = "info", **env: str) -> AgentServer:
        index = len(started)
        home = tmp_path / f"agent{index}"
        home.mkdir()
        if dotenv is not None:
            (home / ".env").write_text(dotenv)
        area = Path(tempfile.mkdtemp(prefix="trinity-test-area-"))
        areas.append(area)
        server = AgentServer(
            env=agent_env(
                simulator_url=sim.base_url,
                home=home,
                secret=SECRET,
                **{"TRINITY_AGENT_WORK_AREA": str(area), **env},
            ),
            log_path=tmp_path / f"agent{index}.log",
            log_level=log_level,
        )
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()
    for area in areas:
        shutil.rmtree(area, ignore_errors=True)
