"""The agent server binds its own Unix socket, and only where no one else can be.

`python -m agent_server --uds PATH` refuses a path another process holds, a directory
that is not 0700 and this user's, and anything at the path that is not a stale socket
of this user's; it replaces a stale one (a killed server's leftover).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_server.__main__ import EXIT_SOCKET_HELD, SocketRefused, bind_unix_socket
from tests.agent_server.support import REPO, AgentServer, agent_env


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short 0700 directory (a socket path must fit in 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="uds-"))
    try:
        yield directory
    finally:
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()


def _listening(path: Path) -> socket.socket:
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder.bind(str(path))
    holder.listen(1)
    return holder


def test_it_refuses_a_path_another_process_listens_on_and_leaves_it_alone(
    socket_dir: Path,
) -> None:
    path = socket_dir / "server.sock"
    holder = _listening(path)
    try:
        inode = os.lstat(path).st_ino
        with pytest.raises(SocketRefused, match="another process listens on it"):
            bind_unix_socket(path)
        assert os.lstat(path).st_ino == inode  # not unlinked, not replaced
    finally:
        holder.close()


def test_a_second_server_of_the_same_path_is_refused_while_the_first_holds_it(
    socket_dir: Path,
) -> None:
    path = socket_dir / "server.sock"
    first = bind_unix_socket(path)
    try:
        with pytest.raises(SocketRefused, match="another agent server holds it"):
            bind_unix_socket(path)
    finally:
        first.sock.close()
        first.close()
    assert not path.exists()  # the first removed its own socket on close


def test_a_stale_socket_of_its_own_is_replaced(socket_dir: Path) -> None:
    path = socket_dir / "server.sock"
    _listening(path).close()  # bound, then gone: a killed server leaves this
    assert path.exists()
    listener = bind_unix_socket(path)
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))  # the new socket accepts
        client.close()
        assert (os.lstat(path).st_mode & 0o777) == 0o600
    finally:
        listener.sock.close()
        listener.close()


def test_a_file_that_is_not_a_socket_is_refused_and_kept(socket_dir: Path) -> None:
    path = socket_dir / "server.sock"
    path.write_text("not a socket")
    with pytest.raises(SocketRefused, match="not a socket"):
        bind_unix_socket(path)
    assert path.read_text() == "not a socket"


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o777])
def test_a_socket_directory_that_is_not_0700_is_refused(socket_dir: Path, mode: int) -> None:
    socket_dir.chmod(mode)
    with pytest.raises(SocketRefused, match="must be 0700"):
        bind_unix_socket(socket_dir / "server.sock")
    assert not (socket_dir / "server.sock").exists()


def test_a_symlinked_socket_directory_is_refused(socket_dir: Path) -> None:
    real = socket_dir / "real"
    real.mkdir(mode=0o700)
    link = socket_dir / "link"
    link.symlink_to(real)
    try:
        with pytest.raises(SocketRefused, match="not a directory owned by this user"):
            bind_unix_socket(link / "server.sock")
    finally:
        link.unlink()
        real.rmdir()


def test_a_path_over_the_unix_socket_limit_is_refused_with_its_length(socket_dir: Path) -> None:
    path = socket_dir / ("s" * 120 + ".sock")
    with pytest.raises(SocketRefused, match="over the 107-byte limit"):
        bind_unix_socket(path)


def _run_server(path: Path, home: Path) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "agent_server", "--uds", str(path)],
        env=agent_env(simulator_url="http://127.0.0.1:9", home=home, secret="s" * 24),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_server_process_refuses_to_start_on_a_path_another_process_listens_on(
    socket_dir: Path, tmp_path: Path
) -> None:
    path = socket_dir / "server.sock"
    holder = _listening(path)
    try:
        result = _run_server(path, tmp_path / "home")
    finally:
        holder.close()
    assert result.returncode == 2
    assert f"refusing to start: {path}: another process listens on it" in result.stderr
    assert "listening on" not in result.stdout


def test_the_server_process_exits_3_when_another_server_of_the_agent_holds_the_socket(
    socket_dir: Path, tmp_path: Path
) -> None:
    # 3, not 2: the local runtime reads it as a concurrent start (StartConflict).
    path = socket_dir / "server.sock"
    first = bind_unix_socket(path)
    try:
        result = _run_server(path, tmp_path / "home")
    finally:
        first.sock.close()
        first.close()
    assert result.returncode == EXIT_SOCKET_HELD == 3
    assert f"refusing to start: {path}: another agent server holds it" in result.stderr


def test_a_started_server_listens_on_its_socket_and_not_on_a_tcp_port(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    server = AgentServer(
        env=agent_env(simulator_url="http://127.0.0.1:9", home=home, secret="s" * 24),
        log_path=tmp_path / "agent.log",
    )
    with server:
        assert server.base_url == f"unix://{server.socket_path}"
        assert server.client is not None
        assert server.client.get("/health").status_code == 200
        inodes = _socket_inodes(server.pid)
        assert inodes, "the server holds no socket"
        own = [where for inode, where in _tcp_listeners().items() if inode in inodes]
        if server.client.get("/health").json()["isolation"] == "sandbox":
            # Its forwarder listens on a Unix socket bound into each sandbox: no TCP.
            assert own == []
            assert server.forwarder_socket() is not None
        else:
            # Its one TCP listener is the credential forwarder, on loopback only, and
            # the agent API is not served there.
            assert len(own) == 1
            ((host, port),) = own
            assert host == "0100007F"  # 127.0.0.1
            answer = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            assert answer.status_code in (401, 403)
            assert "runtime" not in answer.text
    assert not server.socket_path.exists()  # removed on a graceful stop


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:[") : -1])
    return found


def _tcp_listeners() -> dict[str, tuple[str, int]]:
    """Listening TCP sockets by inode: (local address as the kernel writes it, port)."""
    listeners = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                host, port = fields[1].split(":")
                listeners[fields[9]] = (host, int(port, 16))
    return listeners
