"""The local runtime with real agent-server processes: who reaps a stopped server,
and the command that stops everything the embedded default started.

The "worker" is a real separate Python process that starts an agent server through
LocalProcessRuntime (so it is the server's parent, as a Celery worker is); the test
process plays the web process that stops it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from agents import lifecycle
from agents.models import Agent, ProcessState
from agents.runtimes import local
from agents.runtimes.agent_users import installation_tag
from agents.runtimes.base import SpawnSpec
from agents.runtimes.local import LocalProcessRuntime, _socket_dir_ready, socket_dir, socket_path
from simulator.control import SimulatorControl
from tests.agents.factories import AgentFactory
from tests.procs import children_of, proc_stat
from trinity.crypto import Secret

STARTER = r"""
import sys

import django

django.setup()

from agents.runtimes.base import SpawnSpec
from agents.runtimes.local import LocalProcessRuntime
from trinity.crypto import Secret

spawned = LocalProcessRuntime().start(
    SpawnSpec(
        name="reaped",
        runtime="claude-code",
        model="",
        secret=Secret("starter-secret-" + "x" * 20),
        env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
)
print(spawned.handle, flush=True)
sys.stdin.read()  # stay up, as a worker does, until the test closes stdin
"""

REAP_DEADLINE = 10.0  # seconds the starter has to reap its stopped child


def _zombie_children(parent: int) -> list[int]:
    return [child.pid for child in children_of(parent) if child.state == "Z"]


@pytest.mark.e2e
def test_a_server_stopped_by_another_process_is_reaped_by_the_process_that_started_it(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "trinity.settings",
        "TRINITY_VAR_DIR": str(tmp_path),
    }
    starter = subprocess.Popen(  # noqa: S603 - fixed argv
        [sys.executable, "-c", STARTER],
        cwd=settings.BASE_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        handle = starter.stdout.readline().strip()
        assert handle.isdigit(), f"the starter printed {handle!r}"
        server = int(handle)
        stat = proc_stat(server)
        assert stat is not None
        assert stat.ppid == starter.pid

        LocalProcessRuntime().stop(name="reaped", handle=handle)  # the "web" process

        deadline = time.monotonic() + REAP_DEADLINE
        while _zombie_children(starter.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _zombie_children(starter.pid) == []
        assert proc_stat(server) is None
    finally:
        if starter.stdin is not None:
            starter.stdin.close()
        starter.wait(timeout=30)
        # The starter made the agent's OS user (as root) under this VAR_DIR's tag.
        local.user_tags.add(installation_tag(tmp_path))


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_agents_stop_all_stops_every_recorded_agent_server(control: SimulatorControl) -> None:
    agents = [lifecycle.agent_start(agent=AgentFactory.create(name=n)) for n in ("one", "two")]
    pids = [int(agent.process_handle) for agent in agents]
    runtime = LocalProcessRuntime()
    assert all(runtime.is_alive(name=a.name, handle=a.process_handle) for a in agents)

    call_command("agents_stop_all")

    for agent, pid in zip(agents, pids, strict=True):
        agent.refresh_from_db()
        assert agent.process_state == ProcessState.STOPPED
        assert agent.process_handle == ""
        assert not runtime.is_alive(name=agent.name, handle=str(pid))
    assert not Agent.objects.exclude(process_handle="").exists()


def test_an_agents_socket_path_that_would_not_fit_a_socket_address_fails_by_name(
    settings: Any,
) -> None:
    settings.VAR_DIR = Path("/tmp") / ("v" * 100)  # noqa: S108 - never created
    with pytest.raises(RuntimeError, match="over the 107-byte limit.*TRINITY_VAR_DIR"):
        socket_path("a-long-agent-name")


def test_socket_paths_fit_for_the_longest_agent_name_and_differ_per_agent(
    settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    longest = socket_path("n" * 100)
    assert longest.parent == socket_dir().absolute()
    assert len(os.fsencode(longest)) <= 107
    assert socket_path("one") != socket_path("two")


def test_the_socket_directory_is_made_0700_whatever_the_umask_and_tightened_if_looser(
    settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    previous = os.umask(0)
    try:
        assert stat.S_IMODE(_socket_dir_ready().stat().st_mode) == 0o700
        socket_dir().chmod(0o755)
        assert stat.S_IMODE(_socket_dir_ready().stat().st_mode) == 0o700
    finally:
        os.umask(previous)


def test_the_server_log_is_0600_whatever_the_umask_and_an_older_looser_one_is_tightened(
    settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    log = tmp_path / "agents" / "no-model" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"an older server's lines\n")
    log.chmod(0o644)
    # The anthropic-api runtime without a model refuses to start (exit 2): enough to
    # open the log the way every start does.
    spec = SpawnSpec(name="no-model", runtime="anthropic-api", model="", secret=Secret("s" * 32))
    previous = os.umask(0)
    try:
        with pytest.raises(RuntimeError, match="exited with 2 at startup"):
            LocalProcessRuntime().start(spec)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_bytes().startswith(b"an older server's lines\n")
