"""Fixtures for the agent server's end-to-end tests: a real simulator and real servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.agent_server.support import AgentServer, agent_env

if TYPE_CHECKING:
    # Imported lazily below, so the unit tests never depend on the simulator package.
    from simulator.process import SimulatorProcess

SECRET = "e2e-agent-secret-7f3a9c"


@pytest.fixture(scope="session")
def simulator_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorProcess]:
    from simulator.process import SimulatorProcess

    log_path = tmp_path_factory.mktemp("simulator") / "simulator.log"
    with SimulatorProcess(log_path=log_path) as process:
        yield process


@pytest.fixture
def sim(simulator_session: SimulatorProcess) -> SimulatorProcess:
    """The simulator, reset: no credentials, no latency, real time, empty log."""
    simulator_session.control.reset()
    return simulator_session


StartServer = Callable[..., AgentServer]


@pytest.fixture
def start_server(sim: SimulatorProcess, tmp_path: Path) -> Iterator[StartServer]:
    """Start agent servers for this test; each is stopped at teardown.

    `start_server(dotenv=..., log_level=..., **env)` makes a fresh agent home.
    """
    started: list[AgentServer] = []

    def start(*, dotenv: str | None = None, log_level: str = "info", **env: str) -> AgentServer:
        index = len(started)
        home = tmp_path / f"agent{index}"
        home.mkdir()
        if dotenv is not None:
            (home / ".env").write_text(dotenv)
        server = AgentServer(
            env=agent_env(
                simulator_url=sim.base_url,
                home=home,
                secret=SECRET,
                **env,
            ),
            log_path=tmp_path / f"agent{index}.log",
            log_level=log_level,
        )
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()
