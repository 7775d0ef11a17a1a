"""The agent's OS user: what it may reach, proven by running processes as that user.

Only meaningful as root (a non-root server runs the CLI as itself, the weak mode);
with CI=true a missing agent user fails the run instead of skipping it. The sandbox
itself is pinned by test_sandbox.py; here, what holds with and without it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from agent_server.isolation import (
    DEFAULT_AGENT_USER,
    AgentUser,
    IsolationError,
    cli_stage,
    resolve_agent_user,
    work_area_prepare,
)
from agents.runtimes.agent_users import (
    agent_user_comment,
    agent_user_ensure,
    agent_user_name,
    agent_user_remove,
)
from tests.agent_server.conftest import StartServer
from tests.agent_server.support import turn
from tests.procs import processes_of_uid
from tests.skip_policy import in_ci

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess


@pytest.fixture
def agent_user() -> AgentUser:
    if os.geteuid() != 0:
        pytest.skip("separate-user isolation needs the tests to run as root")
    try:
        return resolve_agent_user(DEFAULT_AGENT_USER)
    except IsolationError as exc:
        if in_ci():
            pytest.fail(f"CI runs as root but the agent user is missing: {exc}")
        pytest.skip(f"no agent user here: {exc}")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory anyone may enter, so only the modes under test decide access."""
    path = Path(tempfile.mkdtemp(prefix="trinity-test-isolation-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_agent(user: AgentUser, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # noqa: S603 - fixed argv
        list(argv),
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        capture_output=True,
        timeout=30,
        check=False,
    )


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


@pytest.mark.e2e
def test_the_cli_runs_as_the_agent_user_who_cannot_read_the_servers_environ_or_state(
    sim: SimulatorProcess, start_server: StartServer, agent_user: AgentUser, open_dir: Path
) -> None:
    token = f"sk-ant-oat01-iso-{uuid.uuid4().hex[:12]}"
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.set_latency(1_500)
    home = open_dir / "server-home"
    home.mkdir(mode=0o755)
    (home / ".env").write_text("OPERATOR_SETTING=1\n")
    (home / ".env").chmod(0o644)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token, TRINITY_AGENT_HOME=str(home))

    result: dict[str, httpx.Response] = {}

    def post() -> None:
        with contextlib.suppress(httpx.TransportError):
            result["response"] = server.post(
                "/api/task",
                {"execution_id": str(uuid.uuid4()), "message": "hi", "timeout_seconds": 60},
            )

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    cli_uid = None
    while cli_uid is None and time.monotonic() < deadline:
        for pid in server.children():
            with contextlib.suppress(OSError):
                if b"claude" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                    cli_uid = uid_of(pid)
        time.sleep(0.02)  # polling for a process to appear, not for time to pass
    environ = as_agent(agent_user, "cat", f"/proc/{server.pid}/environ")
    listing = as_agent(agent_user, "ls", str(home))
    dotenv = as_agent(agent_user, "cat", str(home / ".env"))
    thread.join(timeout=60)
    sim.control.set_latency(0)

    assert result["response"].status_code == 200, result["response"].text
    # As root with bubblewrap (CI), the CLI runs in its sandbox, as the agent user.
    assert server.client is not None
    assert server.client.get("/health").json()["isolation"] == "sandbox"
    assert cli_uid == agent_user.uid
    assert environ.returncode != 0 and token.encode() not in environ.stdout
    assert listing.returncode != 0
    assert dotenv.returncode != 0 and b"OPERATOR_SETTING" not in dotenv.stdout
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_the_work_area_lets_the_agent_in_its_work_dir_only(
    agent_user: AgentUser, open_dir: Path
) -> None:
    area = work_area_prepare(open_dir / "area", agent_user)

    wrote = as_agent(agent_user, "touch", str(area.workdir / "made-by-agent"))
    planted = as_agent(agent_user, "mkdir", str(area.homes / "planted"))
    replaced = as_agent(agent_user, "mv", str(area.workdir), str(area.root / "moved"))
    listed = as_agent(agent_user, "ls", str(area.root))

    assert wrote.returncode == 0
    assert planted.returncode != 0  # homes/ is the server's: no symlink can be planted
    assert replaced.returncode != 0
    assert listed.returncode != 0  # 0711: passable, not listable
    assert area.workdir.stat().st_uid == agent_user.uid


def test_a_work_area_someone_else_owns_is_refused(agent_user: AgentUser, open_dir: Path) -> None:
    squatted = open_dir / "area"
    squatted.mkdir()
    os.chown(squatted, agent_user.uid, agent_user.gid)

    with pytest.raises(IsolationError, match="not a directory owned by"):
        work_area_prepare(squatted, agent_user)


def test_the_staged_cli_runs_as_the_agent_user_when_its_checkout_is_root_only(
    agent_user: AgentUser, open_dir: Path
) -> None:
    checkout = open_dir / "checkout"
    (checkout / "bin").mkdir(parents=True)
    binary = checkout / "bin" / "claude"
    binary.write_text("#!/bin/sh\necho staged-cli-ran\n")
    binary.chmod(0o755)
    checkout.chmod(0o700)  # a root-only clone
    cache = open_dir / "cli-cache"

    staged = cli_stage(str(binary), cache)
    again = cli_stage(str(binary), cache)

    with pytest.raises(PermissionError):
        as_agent(agent_user, str(binary))  # unreachable in place
    ran = as_agent(agent_user, staged)
    assert ran.returncode == 0 and ran.stdout == b"staged-cli-ran\n"
    assert again == staged and len(list(cache.iterdir())) == 1  # cached by size + mtime
    assert Path(staged).stat().st_ino == binary.stat().st_ino  # a hard link, not a copy


def test_a_changed_cli_is_staged_again_under_a_new_name(open_dir: Path) -> None:
    binary = open_dir / "claude"
    binary.write_text("#!/bin/sh\necho one\n")
    binary.chmod(0o755)
    first = cli_stage(str(binary), open_dir / "cache")
    binary.write_text("#!/bin/sh\necho two, longer\n")
    os.utime(binary, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    second = cli_stage(str(binary), open_dir / "cache")

    assert first != second
    assert Path(second).read_text() == "#!/bin/sh\necho two, longer\n"


def test_a_missing_agent_user_is_named_with_the_fix() -> None:
    missing = f"no-such-user-{uuid.uuid4().hex[:8]}"
    with pytest.raises(IsolationError, match="make setup"):
        resolve_agent_user(missing)
    with pytest.raises(KeyError):
        pwd.getpwnam(missing)


@pytest.fixture
def own_user(agent_user: AgentUser) -> Iterator[AgentUser]:
    """A user of this test's alone (made as the local runtime makes an agent's): its
    server kills every process of it, which must reach no one else's."""
    tag = uuid.uuid4().hex[:12]
    name = agent_user_name(key="reaped", tag=tag)
    comment = agent_user_comment(key="reaped", tag=tag)
    yield agent_user_ensure(name=name, comment=comment)
    agent_user_remove(name=name, comment=comment)


@pytest.mark.e2e
def test_without_a_sandbox_nothing_a_turn_started_outlives_it(
    sim: SimulatorProcess, start_server: StartServer, own_user: AgentUser
) -> None:
    token = f"sk-ant-oat01-reap-{uuid.uuid4().hex[:12]}"
    sim.control.register(token, kind="oauth", label="sub-a")
    trigger = f"reap-{uuid.uuid4().hex[:8]}"
    daemons = (
        "setsid sh -c 'while :; do sleep 0.2; done' </dev/null >/dev/null 2>&1 & "
        "( ( nohup sh -c 'while :; do sleep 0.2; done' </dev/null >/dev/null 2>&1 & ) & ); "
        "sleep 0.3; echo started"
    )
    sim.control.arm_red_team(trigger=trigger, reads=[], commands=[daemons])
    server = start_server(
        CLAUDE_CODE_OAUTH_TOKEN=token,
        TRINITY_AGENT_USER=own_user.name,
        TRINITY_AGENT_SANDBOX="off",
        TRINITY_AGENT_ALLOWED_TOOLS="Bash",
    )

    response = server.post("/api/task", turn(message=f"{trigger}: leave something"))

    assert response.status_code == 200, response.text
    assert any("started" in r["content"] for r in sim.control.red_team()["results"])
    assert processes_of_uid(own_user.uid) == []
    assert server.client is not None
    health = server.client.get("/health").json()
    assert health["isolation"] == "separate-user"
    assert health["isolation_missing"] == ["sandbox: turned off (TRINITY_AGENT_SANDBOX=off)"]
