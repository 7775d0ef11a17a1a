"""The Docker engine the test suite runs containers on: find one, or start one.

    python deploy/engine.py up     # prints `export DOCKER_HOST=...`; says which on stderr
    python deploy/engine.py down   # stops the engine `up` started (by its recorded PID)

``up`` takes, in order, the first engine that answers a ping:

1. the one ``DOCKER_HOST`` names;
2. the system's, ``/var/run/docker.sock``;
3. the one an earlier ``up`` of this checkout started, ``.docker-engine/docker.sock``.

First it installs what is missing of Debian's ``docker.io``, ``debootstrap`` (the
image builds) and ``docker-compose`` (the deployment test), as root. When no engine
answers it starts ``dockerd`` itself, with its data, exec root, socket, PID file and
log under ``.docker-engine/`` (not under ``var/``: that is the platform's own state,
which the agents' red-team test walks). That engine has no default bridge (``--bridge
none``): the project's containers run on networks the project creates. Its storage
driver is the engine's own choice (overlay2 where the kernel has overlayfs, vfs
otherwise) unless ``TRINITY_DOCKER_STORAGE_DRIVER`` names one.

With ``CI=true`` an engine that cannot be found or started fails (exit 1), like
Postgres and Redis in tests/backends.py; outside CI ``up`` prints nothing and the
container tests skip, saying why. ``down`` stops only an engine ``up`` started, by
the PID it recorded, and leaves any other alone.

Standard library only: it runs before the project's packages are installed.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".docker-engine"
SOCKET = STATE / "docker.sock"
PIDFILE = STATE / "dockerd.pid"
LOG = STATE / "dockerd.log"
SYSTEM_SOCKET = Path("/var/run/docker.sock")
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
# What the container tests and the image builds need from Debian: the command each
# package brings, by package.
PACKAGES = {
    "docker.io": "dockerd",
    "debootstrap": "debootstrap",
    "docker-compose": "docker-compose",
}


class EngineError(RuntimeError):
    """No engine answers and none could be started; the message says why."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def engine_version(host: str, timeout: float = 3.0) -> str | None:
    """The engine's version if ``host`` (``unix://...`` or ``tcp://h:p``) answers."""
    if host.startswith("unix://"):
        connection: http.client.HTTPConnection = _UnixConnection(host[7:], timeout)
    elif host.startswith("tcp://"):
        address = host[6:].rstrip("/")
        connection = http.client.HTTPConnection(address, timeout=timeout)
    else:
        return None
    try:
        connection.request("GET", "/version")
        response = connection.getresponse()
        body = response.read().decode(errors="replace")
    except OSError:
        return None
    finally:
        connection.close()
    if response.status != 200:
        return None
    import json

    try:
        return str(json.loads(body).get("Version", "unknown"))
    except ValueError:
        return None


def _install(missing: list[str]) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise EngineError(
            f"{', '.join(missing)} not installed and this is not root on Debian: "
            f"apt-get install {' '.join(missing)}, or set DOCKER_HOST"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", *missing],
    ):
        result = subprocess.run(  # noqa: S603 - fixed command lines
            command, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise EngineError(f"{' '.join(command)} failed: {' / '.join(tail)}")


def dockerd_command() -> list[str]:
    command = [
        "dockerd",
        f"--host=unix://{SOCKET}",
        f"--data-root={STATE / 'data'}",
        f"--exec-root={STATE / 'exec'}",
        f"--pidfile={PIDFILE}",
        "--bridge=none",
    ]
    driver = os.environ.get("TRINITY_DOCKER_STORAGE_DRIVER", "").strip()
    if driver:
        command.append(f"--storage-driver={driver}")
    return command


def _start() -> str:
    """Start dockerd under .docker-engine/ and wait for it; returns its version."""
    if os.geteuid() != 0:
        raise EngineError("no Docker engine answers, and starting dockerd needs root")
    STATE.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        SOCKET.unlink()
    with LOG.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - a fixed command line
            dockerd_command(), stdout=log, stderr=log, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        version = engine_version(f"unix://{SOCKET}")
        if version is not None:
            return version
        if process.poll() is not None:
            break
        time.sleep(0.5)
    tail = LOG.read_text(errors="replace").strip().splitlines()[-3:]
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    raise EngineError(f"dockerd did not come up ({LOG}): {' / '.join(tail)}")


def missing_packages() -> list[str]:
    return [package for package, command in PACKAGES.items() if shutil.which(command) is None]


def engine_up() -> tuple[str, str]:
    """(DOCKER_HOST, a sentence saying which engine) for the first that answers; the
    packages the tests need beside the engine are installed first when missing."""
    missing = missing_packages()
    if missing:
        _install(missing)
    candidates = []
    if os.environ.get("DOCKER_HOST"):
        candidates.append((os.environ["DOCKER_HOST"], "from DOCKER_HOST"))
    candidates.append((f"unix://{SYSTEM_SOCKET}", "the system's"))
    candidates.append((f"unix://{SOCKET}", "started earlier by this checkout"))
    for host, which in candidates:
        version = engine_version(host)
        if version is not None:
            return host, f"Docker engine {version} at {host} ({which})"
    version = _start()
    host = f"unix://{SOCKET}"
    return host, f"Docker engine {version} at {host} (started now; PID in {PIDFILE})"


def _unmount_leftovers() -> None:
    """dockerd leaves its default network namespace bind-mounted under its exec root;
    unmount whatever is mounted under .docker-engine/ so the checkout can be removed."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    inside = [line.split()[1] for line in mounts if len(line.split()) > 1]
    ours = [m for m in inside if m.startswith(f"{STATE}/")]
    for mountpoint in sorted(ours, key=len, reverse=True):
        subprocess.run(["umount", mountpoint], capture_output=True, check=False)  # noqa: S603,S607


def engine_down() -> str:
    """Stop the engine ``up`` started (by its PID file); a sentence saying what happened."""
    try:
        pid = int(PIDFILE.read_text().strip())
    except (FileNotFoundError, ValueError):
        return "no engine of this checkout's is running"
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        PIDFILE.unlink(missing_ok=True)
        return f"the engine of PID {pid} had already stopped"
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _unmount_leftovers()
            return f"stopped the engine of PID {pid}"
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _unmount_leftovers()
    return f"killed the engine of PID {pid} (it did not stop in {STOP_TIMEOUT:.0f} s)"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def main(argv: list[str]) -> int:
    if argv[1:] == ["down"]:
        print(f"docker: {engine_down()}", file=sys.stderr)
        return 0
    if argv[1:] != ["up"]:
        print("usage: python deploy/engine.py up|down", file=sys.stderr)
        return 2
    try:
        host, which = engine_up()
    except EngineError as exc:
        if _in_ci():
            print(f"CI: no Docker engine: {exc}; refusing to go on without one", file=sys.stderr)
            return 1
        print(f"containers: none ({exc}); the container tests skip", file=sys.stderr)
        return 0
    print(f"containers run on: {which}", file=sys.stderr)
    print(f"export DOCKER_HOST={host}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
