"""deploy/engine.py: which engine the suite takes, and that `down` stops only the one
`up` started. The engine these run against is the one `make test` uses (DOCKER_HOST);
starting a second dockerd here would fight the first over iptables, so `up`'s start
path is exercised by every `make test` on a machine with no engine (CI's), not here."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine", ROOT / "deploy/engine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


engine_script = _load()


def test_the_engine_docker_host_names_is_taken_first_and_said(engine: Any) -> None:
    host, which = engine_script.engine_up()
    assert host == os.environ["DOCKER_HOST"]
    assert which.startswith("Docker engine ") and host in which


def test_an_address_with_nothing_behind_it_is_no_engine(tmp_path: Path) -> None:
    assert engine_script.engine_version(f"unix://{tmp_path / 'none.sock'}") is None
    assert engine_script.engine_version("ssh://somewhere") is None


def test_the_started_engine_keeps_everything_under_var_docker_and_has_no_default_bridge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRINITY_DOCKER_STORAGE_DRIVER", raising=False)
    command = engine_script.dockerd_command()
    state = str(ROOT / ".docker-engine")
    assert command[0] == "dockerd" and "--bridge=none" in command
    paths = [arg.split("=", 1)[1] for arg in command if arg.startswith("--") and "/" in arg]
    assert paths and all(p.removeprefix("unix://").startswith(state) for p in paths)
    assert not any(arg.startswith("--storage-driver") for arg in command)
    monkeypatch.setenv("TRINITY_DOCKER_STORAGE_DRIVER", "vfs")
    assert "--storage-driver=vfs" in engine_script.dockerd_command()


def _detached_sleeper() -> int:
    """A process that is not this one's child (as dockerd is not the suite's): its
    exit is reaped by init, so `down` sees it gone."""
    started = subprocess.run(
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],  # noqa: S607 - Debian's sh
        capture_output=True,
        text=True,
        check=True,
    )
    return int(started.stdout.strip())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_down_stops_only_the_process_its_pid_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_script, "PIDFILE", tmp_path / "dockerd.pid")
    # `down` unmounts what is left under the engine's state directory: here that is
    # tmp_path, not the running engine's (whose network namespaces are mounted there;
    # unmounting them broke every later host-network build on it).
    monkeypatch.setattr(engine_script, "STATE", tmp_path)
    assert engine_script.engine_down() == "no engine of this checkout's is running"
    stand_in, bystander = _detached_sleeper(), _detached_sleeper()
    try:
        (tmp_path / "dockerd.pid").write_text(f"{stand_in}\n")
        assert engine_script.engine_down() == f"stopped the engine of PID {stand_in}"
        assert not _alive(stand_in)
        assert _alive(bystander)
    finally:
        for pid in (stand_in, bystander):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
