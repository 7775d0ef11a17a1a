"""The sandbox itself (agent_server/sandbox.py), run for real with bubblewrap as root:
what a process inside can reach, see, write and leave behind, and the limits on it.

Needs root and bubblewrap (`make setup` installs it); under CI=true, which runs as
root, a missing one fails these tests instead of skipping them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent_server.cgroups import Limits, _own_cgroups, cgroup_make, parse_memory
from agent_server.config import AgentConfig
from agent_server.confinement import confinement_make
from agent_server.isolation import DEFAULT_AGENT_USER, AgentUser, IsolationError, resolve_agent_user
from agent_server.sandbox import (
    ETC_ENTRIES,
    RELAY_PORT,
    Sandbox,
    SandboxUnavailable,
    sandbox_probe,
    sandbox_tools,
)
from tests.skip_policy import in_ci


def _needs(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI runs as root with bubblewrap installed: {reason}")
    pytest.skip(reason)


@pytest.fixture
def user() -> AgentUser:
    if os.geteuid() != 0:
        _needs("the sandbox needs the tests to run as root")
    try:
        return resolve_agent_user(DEFAULT_AGENT_USER)
    except Exception as exc:  # noqa: BLE001 - reported as the reason
        _needs(f"no agent user: {exc}")
        raise


@pytest.fixture
def places(user: AgentUser) -> Iterator[dict[str, Path]]:
    """A root-only directory holding the forwarder's socket, and the agent's working
    dir and HOME, owned by the agent user, in a directory anyone may enter."""
    root = Path(tempfile.mkdtemp(prefix="trinity-test-sandbox-"))
    root.chmod(0o755)
    private = root / "server"
    private.mkdir(mode=0o700)
    work, home = root / "area" / "work", root / "area" / "home"
    for path in (work, home):
        path.mkdir(parents=True)
        os.chown(path, user.uid, user.gid)
        path.chmod(0o700)
    yield {"root": root, "socket": private / "forwarder.sock", "work": work, "home": home}
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def forwarder(places: dict[str, Path], user: AgentUser) -> Iterator[Path]:
    """A stand-in for the forwarder on its Unix socket (0600, the agent user's): it
    answers every connection with one line."""
    path = places["socket"]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chown(path, user.uid, user.gid)
    path.chmod(0o600)
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"forwarder-here\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(timeout=5)
    server.close()


def sandbox_for(user: AgentUser, socket_path: Path, **kwargs: object) -> Sandbox:
    try:
        tools = sandbox_tools()
        sandbox_probe(tools)
    except SandboxUnavailable as exc:
        _needs(str(exc))
        raise
    return Sandbox(tools=tools, user=user, forwarder_socket=socket_path, **kwargs)  # type: ignore[arg-type]


def run_in(sandbox: Sandbox, places: dict[str, Path], script: str) -> str:
    argv = sandbox.argv(["/bin/bash", "-c", script], cwd=places["work"], home=places["home"])
    done = subprocess.run(  # noqa: S603 - the sandbox's own argv
        argv,
        env={"PATH": "/usr/bin:/bin", "HOME": str(places["home"])},
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.stdout.decode() + done.stderr.decode()


def test_inside_only_the_forwarder_answers_through_the_relay(
    user: AgentUser, places: dict[str, Path], forwarder: Path
) -> None:
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(1)
    port = host.getsockname()[1]
    sandbox = sandbox_for(user, forwarder)
    try:
        out = run_in(
            sandbox,
            places,
            f"exec 3<>/dev/tcp/127.0.0.1/{RELAY_PORT} && head -1 <&3; "
            f"(exec 4<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo host-open "
            "|| echo host-closed; "
            "ip -o link 2>/dev/null | wc -l; ls /run/trinity",
        )
    finally:
        host.close()

    assert "forwarder-here" in out
    assert "host-closed" in out and "host-open" not in out
    assert "forwarder.sock" in out


def test_inside_it_is_the_agent_user_without_privileges_in_a_private_filesystem(
    user: AgentUser, places: dict[str, Path], forwarder: Path
) -> None:
    token = secrets.token_hex(6)
    host_tmp = Path(tempfile.gettempdir()) / f"host-tmp-{token}"
    host_tmp.write_text("host")
    sandbox = sandbox_for(user, forwarder)
    try:
        out = run_in(
            sandbox,
            places,
            "id -u; id -g; id -G; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; "
            f"echo tmp-listing; ls -A /tmp; echo end; cat {host_tmp} 2>&1; ls /etc; "
            "touch /usr/x 2>&1; touch $HOME/h && echo home-ok; touch ./w && echo work-ok; "
            f"ls {places['socket'].parent} 2>&1; umask",
        )
    finally:
        host_tmp.unlink()

    lines = out.splitlines()
    assert lines[:3] == [str(user.uid), str(user.gid), str(user.gid)]
    assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out
    assert "NoNewPrivs:\t1" in out
    listing = out.split("tmp-listing\n")[1].split("end\n")[0]
    assert f"host-tmp-{token}" not in listing  # /tmp is its own
    assert f"{host_tmp}: No such file" in out  # nor can the host's be named
    listed = {line for line in lines if line in ETC_ENTRIES or line in {"shadow", "sudoers"}}
    assert "shadow" not in listed and "passwd" in listed
    assert "Read-only file system" in out
    assert "home-ok" in out and "work-ok" in out
    assert lines[-1] == "0077"


def test_nothing_started_inside_outlives_the_sandbox(
    user: AgentUser, places: dict[str, Path], forwarder: Path
) -> None:
    mark = f"3000.{secrets.randbelow(10**6):06d}"  # a sleep only this test runs
    sandbox = sandbox_for(user, forwarder)
    out = run_in(
        sandbox,
        places,
        f"setsid sleep {mark} </dev/null >/dev/null 2>&1 & "
        f"( ( nohup sleep {mark} </dev/null >/dev/null 2>&1 & ) & ); sleep 0.3; "
        "pgrep -c -x sleep",
    )

    assert out.split()[0] == "2"  # both were running inside
    deadline = time.monotonic() + 5
    while _running(mark) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the kernel's teardown of the namespace
    assert _running(mark) == []


def test_the_limits_bound_every_process_of_the_sandbox(
    user: AgentUser, places: dict[str, Path], forwarder: Path
) -> None:
    limits = Limits(memory_bytes=256 * 1024**2, cpu_millicores=500, pids=24)
    cgroup, missing = cgroup_make(limits, name=f"test-{secrets.token_hex(4)}")
    if cgroup is None:
        _needs(f"no cgroup controller here: {missing}")
    assert cgroup is not None
    sandbox = sandbox_for(user, forwarder, cgroup=cgroup)
    try:
        # Fork well past the pids limit: the kernel refuses the surplus.
        argv = sandbox.argv(
            [
                "/bin/bash",
                "-c",
                # Shell builtins after the bomb: at the limit not even `pgrep` forks.
                "( for i in $(seq 60); do sleep 30 & done ) 2>/dev/null; "
                "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo running $n",
            ],
            cwd=places["work"],
            home=places["home"],
        )
        done = subprocess.run(  # noqa: S603 - the sandbox's own argv
            argv,
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=60,
            check=False,
            preexec_fn=cgroup.join,  # noqa: PLW1509 - what the runtime does per spawn
        )
        out = done.stdout.decode()
        limit_files = [d / "memory.limit_in_bytes" for d in cgroup.directories]
        memory = [f.read_text().strip() for f in limit_files if f.exists()]
    finally:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
            (d / "cgroup.procs").read_text().strip() for d in cgroup.directories
        ):
            time.sleep(0.05)  # the sandbox's processes are being torn down
        cgroup.close()

    assert "running " in out, done.stderr.decode()[-2000:]
    running = int(out.split("running ")[1].split()[0])
    assert 1 < running <= 24, out  # bwrap and its init count too
    assert missing == []
    assert memory in ([], [str(256 * 1024**2)])  # v1 names it so; v2 says memory.max
    assert all(not d.exists() for d in cgroup.directories)


def test_a_host_without_the_tools_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        sandbox_tools()


def _running(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def test_a_servers_own_cgroups_are_read_per_controller(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text(
        "9:name=systemd:/\n8:pids:/svc\n4:memory:/process_api/abc\n2:cpu,cpuacct:/svc\n0::/svc\n"
    )
    own = _own_cgroups(proc)
    assert own["memory"] == "/process_api/abc"  # the limit's cgroup is made under this
    assert own["cpu"] == own["cpuacct"] == own["pids"] == "/svc"
    assert own[""] == "/svc"  # the v2 line


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        ("2g", 2 * 1024**3),
        ("512m", 512 * 1024**2),
        ("64k", 65536),
        ("1048576", 1048576),
        ("1Gb", 1024**3),
    ],
)
def test_memory_limits_read_as_docker_writes_them(raw: str, size: int) -> None:
    assert parse_memory(raw) == size


def test_a_host_without_the_sandbox_says_what_is_missing_or_refuses_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap, socat or setpriv here
    config = AgentConfig(
        secret="s" * 24,
        runtime="claude-code",
        model=None,
        home=tmp_path,
        timeout_max=None,
        claude_bin="claude",
        boot_guard=False,
        agent_user=AgentUser(name="agent", uid=4242, gid=4242),
    )

    weak = confinement_make(config, cli_binary=None)
    with pytest.raises(IsolationError, match="TRINITY_AGENT_SANDBOX=required.*bubblewrap"):
        confinement_make(replace(config, sandbox="required"), cli_binary=None)
    off = confinement_make(replace(config, sandbox="off"), cli_binary=None)
    nobody = confinement_make(replace(config, agent_user=None), cli_binary=None)

    assert (weak.isolation, weak.sandbox, weak.user) == ("separate-user", None, config.agent_user)
    assert weak.missing == [
        "sandbox: not installed: bwrap (Debian package bubblewrap), socat (Debian package "
        "socat), setpriv (Debian package util-linux), sh (Debian package dash)"
    ]
    assert weak.forwarder_listen() is None  # the forwarder keeps its loopback port
    assert off.missing == ["sandbox: turned off (TRINITY_AGENT_SANDBOX=off)"]
    assert nobody.isolation == "same-user" and nobody.missing[0].startswith("root:")
