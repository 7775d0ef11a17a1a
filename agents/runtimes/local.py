"""Agent servers as local subprocesses: the embedded default.

The pid and the endpoint are recorded on the Agent row, so a restarted web process
finds the agents that kept running. Each agent has two places:

- its server's home, var/agents/<name>/ (0700, the platform's user): the `.env` and
  the server log; the agent's OS user cannot enter it;
- its work area, <work root>/<name>/ (TRINITY_AGENT_WORK_ROOT, outside var/): the
  CLI's working directory and HOMEs, laid out and handed to the agent user by the
  agent server (agent_server/isolation.py). Nothing secret is ever written there.

As root, each agent has an OS user of its own (`agents/runtimes/agent_users.py`),
made before its server first starts and removed (its processes killed first) when
the agent is discarded; its server runs the CLI as that user, in a sandbox where the
host has bubblewrap (agent_server/sandbox.py), with the limits the settings name.

Credentials stay in the server's memory; servers before the forwarder wrote a
reloaded token to <home>/.trinity/oauth_token, which forget_credentials still removes.

No port is picked and handed over: the server binds its own Unix socket in
var/run/ (0700, the platform's user's), ``unix://<var>/run/<digest>.sock``, which no
other local user can connect to or bind first; and a start returns only once
whatever answers there proved it holds the agent's secret (agents/client.py
``prove``), so nothing is ever sent to a process that merely answered first.

Whoever starts a server is its parent, and only a parent can reap: a server started
by the worker and stopped by the web process would otherwise stay a zombie under the
worker. So every start hands its Popen to a reaper thread that waits on it; the
parent collects the exit status the moment the server exits, whoever killed it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from django.conf import settings

from agent_server.isolation import IsolationError, own_dir
from agents.client import AgentServerClient, AgentServerUnavailable, EndpointUnproven
from agents.runtimes.agent_users import (
    AgentUserError,
    agent_user_comment,
    agent_user_ensure,
    agent_user_name,
    agent_user_remove,
    agent_users_of,
    installation_tag,
)
from agents.runtimes.base import Spawned, SpawnSpec, StartConflict

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
# The default work roots' name (`default_work_root`); the tests' canary finds them by it.
WORK_ROOT_PREFIX = "trinity-agents-"
# sun_path holds 108 bytes on Linux, the terminating NUL included.
UNIX_PATH_MAX = 107
# agent_server/__main__.py EXIT_SOCKET_HELD: another server of this agent holds the
# socket (this module does not import the server's entry point).
EXIT_SOCKET_HELD = 3
# Only these reach an agent process from the platform's own environment: it must not
# inherit DATABASE_URL, SECRET_KEY or a stray ANTHROPIC_API_KEY. TRINITY_AGENT_SANDBOX
# (auto, off, required) is the operator's say on the agents' sandbox.
INHERITED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "TRINITY_CLAUDE_BIN",
    "NODE_OPTIONS",
    "TRINITY_AGENT_SANDBOX",
)
# The agent user may pass through the work root to its own area, never list it.
WORK_ROOT_MODE = 0o711

# The servers this process started (it is their parent), by pid. Entries of exited
# servers are pruned on the next start.
_children: dict[int, subprocess.Popen[bytes]] = {}
# The installation tags this process made agent users for (a test run removes them).
user_tags: set[str] = set()


def _home_path(name: str) -> Path:
    return Path(settings.VAR_DIR) / "agents" / name


def agent_home(name: str) -> Path:
    home = _home_path(name)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def socket_dir() -> Path:
    """Where agent servers bind their sockets: one 0700 directory of the platform's."""
    return Path(settings.VAR_DIR) / "run"


def socket_path(name: str) -> Path:
    """The Unix socket the agent's server binds; raises RuntimeError when the path
    would not fit a socket address.

    Named by a digest of the agent's name, not the name itself: a slug may be 100
    characters, and the whole path must fit in 107 bytes.
    """
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    path = socket_dir().absolute() / f"{digest}.sock"
    size = len(os.fsencode(path))
    if size > UNIX_PATH_MAX:
        raise RuntimeError(
            f"the agent server's socket path {path} is {size} bytes, over the "
            f"{UNIX_PATH_MAX}-byte limit of a Unix socket path; set TRINITY_VAR_DIR to "
            "a shorter directory"
        )
    return path


def _socket_dir_ready() -> Path:
    """Create the socket directory 0700 (the umask does not get a say)."""
    directory = socket_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(directory)
    # Anything but our own real directory is left for the server to refuse loudly.
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
        os.chmod(directory, 0o700)
    return directory


def _listener_pid(path: Path) -> int | None:
    """The pid of the process listening on the Unix socket ``path`` (SO_PEERCRED: the
    kernel's word, not the server's), or None when nobody accepts there."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
        pid, _, _ = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return int(pid)
    except OSError:
        return None
    finally:
        probe.close()


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 2000))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""


def work_root() -> Path:
    """TRINITY_AGENT_WORK_ROOT, else the default for this VAR_DIR (`default_work_root`)."""
    if settings.TRINITY_AGENT_WORK_ROOT is not None:
        return Path(settings.TRINITY_AGENT_WORK_ROOT)
    return default_work_root(Path(settings.VAR_DIR))


def default_work_root(var_dir: Path) -> Path:
    """A directory in the system temp dir named after this user and `var_dir`: two
    checkouts (or two tests' VAR_DIRs) on one machine never share one."""
    tag = installation_tag(var_dir)
    return Path(tempfile.gettempdir()) / f"{WORK_ROOT_PREFIX}{os.geteuid()}-{tag}"


def _tag() -> str:
    return installation_tag(Path(settings.VAR_DIR))


def os_user_name(name: str) -> str:
    """The OS user the agent with runtime key `name` runs its CLI as (when root)."""
    return agent_user_name(key=name, tag=_tag())


def os_user_ensure(name: str) -> str | None:
    """Create the agent's own OS user if it is missing (as root; idempotent, safe
    against a concurrent start); its name, or None when not root (the weak mode)."""
    if os.geteuid() != 0:
        return None
    user = os_user_name(name)
    agent_user_ensure(name=user, comment=agent_user_comment(key=name, tag=_tag()))
    user_tags.add(_tag())
    return user


def os_user_remove(name: str) -> None:
    """Kill every process of the agent's OS user and delete the user (as root)."""
    if os.geteuid() == 0:
        agent_user_remove(name=os_user_name(name), comment=agent_user_comment(key=name, tag=_tag()))


def os_users_remove_all(tag: str | None = None) -> list[str]:
    """Remove every agent user installation `tag` (default: this one) made, e.g. when
    a test's VAR_DIR ends; returns their names."""
    if os.geteuid() != 0:
        return []
    tag = tag or _tag()
    removed = []
    for user in agent_users_of(tag):
        # agent_users_of found it by the installation's mark: its comment is its own.
        if agent_user_remove(name=user, comment=pwd.getpwnam(user).pw_gecos):
            removed.append(user)
    return removed


def _area_path(name: str) -> Path:
    return work_root() / name


def agent_work_area(name: str) -> Path:
    """The agent's work area path, its parent made and checked (the agent server lays
    out the area itself)."""
    root = work_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        # The agent server's own rule for the directories it lays out: a real
        # directory of this user with exactly this mode; a planted one is refused.
        own_dir(root, mode=WORK_ROOT_MODE)
    except IsolationError as exc:
        raise RuntimeError(str(exc)) from None
    return root / name


def _token_files(home: Path) -> list[Path]:
    """The token file an agent server from before the forwarder wrote on a reload, and
    any temp file a torn write left beside it (``.oauth_token.<hex>.tmp``); servers
    now keep a reloaded token in memory only."""
    state = home / ".trinity"
    return [state / "oauth_token", *state.glob(".oauth_token.*.tmp")]


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the server to exit, so its exit status never lingers as a zombie."""
    process.wait()


def _watch(process: subprocess.Popen[bytes]) -> None:
    for pid, child in list(_children.items()):
        if child.returncode is not None:
            _children.pop(pid, None)
    _children[process.pid] = process
    threading.Thread(
        target=_reap, args=(process,), name=f"reap-agent-server-{process.pid}", daemon=True
    ).start()


def _is_agent_server(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"agent_server" in cmdline


def _has_exited(pid: int) -> bool:
    """Whether the agent server ``pid`` is done exiting (gone, or a zombie for its
    parent to reap), or the pid now names something else.

    Not ``not _is_agent_server``: an exiting process has released its memory, so its
    cmdline reads empty, well before it is a zombie.
    """
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    if stat_line.rsplit(")", 1)[1].split()[0] in {"Z", "X"}:
        return True
    return bool(cmdline) and b"agent_server" not in cmdline


def _server_env(spec: SpawnSpec, home: Path, os_user: str | None) -> dict[str, str]:
    """The agent server's environment: the allow-listed part of ours, the spec's,
    where its home, work area and staged CLI are, its agent's own OS user (as root),
    and the limits of its sandbox (as the Docker runtime sets them on a container)."""
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    env.update(spec.environment())
    env["TRINITY_AGENT_HOME"] = str(home)
    env["TRINITY_AGENT_WORK_AREA"] = str(agent_work_area(spec.name))
    # The CLI binary is staged here for the agent user (agent_server/isolation.py).
    env["TRINITY_AGENT_CLI_CACHE"] = str(work_root() / ".cli")
    if os_user is not None:
        env["TRINITY_AGENT_USER"] = os_user
    env["TRINITY_AGENT_MEMORY_LIMIT"] = settings.TRINITY_AGENT_MEMORY_LIMIT
    env["TRINITY_AGENT_CPU_MILLICORES"] = str(settings.TRINITY_AGENT_CPU_MILLICORES)
    env["TRINITY_AGENT_PIDS_LIMIT"] = str(settings.TRINITY_AGENT_PIDS_LIMIT)
    return env


def _spawn(env: dict[str, str], path: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `python -m agent_server --uds path`, logging to `log_path`."""
    # 0600 whatever the umask: the log names the agent's turns and is the platform's
    # alone (an older, looser log is tightened).
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
    os.fchmod(log.fileno(), 0o600)
    try:
        return subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [sys.executable, "-m", "agent_server", "--uds", str(path)],
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a stop takes the CLI children too
        )
    finally:
        log.close()


class LocalProcessRuntime:
    name = "local"
    contained = False  # on the host: only the server's sandbox contains the agent

    def start(self, spec: SpawnSpec) -> Spawned:
        """Spawn the server on its socket and return once it proved the agent's secret.

        Raises StartConflict when another server of this agent holds the socket (a
        concurrent start won it: the socket is the agent's exclusive claim, as the
        container name is for docker), RuntimeError naming the endpoint when the server
        exits at startup, when something else answers there without the proof (our
        server is stopped, and nothing was sent), or when nothing answers in time.
        """
        home = agent_home(spec.name)
        path = socket_path(spec.name)
        _socket_dir_ready()
        endpoint = f"unix://{path}"
        log_path = home / "server.log"
        try:
            os_user = os_user_ensure(spec.name)
        except AgentUserError as exc:
            raise RuntimeError(f"agent server {spec.name!r} not started: {exc}") from None
        process = _spawn(_server_env(spec, home, os_user), path, log_path)
        _watch(process)
        handle = str(process.pid)
        client = AgentServerClient(endpoint=endpoint, secret=spec.secret, handle=handle)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                if process.returncode == EXIT_SOCKET_HELD:
                    raise StartConflict(f"another agent server of {spec.name!r} holds {endpoint}")
                reason = _last_line(log_path)
                raise RuntimeError(
                    f"agent server {spec.name!r} exited with {process.returncode} at startup "
                    f"on {endpoint}{': ' + reason if reason else ''}; see {log_path}"
                )
            try:
                client.prove(timeout=1.0)
            except EndpointUnproven as exc:
                self.stop(name=spec.name, handle=handle)
                raise RuntimeError(f"agent server {spec.name!r} not started: {exc}") from None
            except AgentServerUnavailable:
                time.sleep(0.1)  # not listening yet
                continue
            holder = _listener_pid(path)
            if holder is None:
                time.sleep(0.1)  # it went away meanwhile: poll again (our own exit included)
                continue
            if holder != process.pid:
                # It proved the agent's secret, so it is this agent's server, but not
                # the one this start spawned (which cannot bind the socket it holds).
                self.stop(name=spec.name, handle=handle)
                raise StartConflict(
                    f"another agent server of {spec.name!r} (pid {holder}) serves {endpoint}"
                )
            logger.info("agent %s started: pid %s at %s", spec.name, process.pid, endpoint)
            return Spawned(endpoint=endpoint, handle=handle)
        self.stop(name=spec.name, handle=handle)
        raise RuntimeError(f"agent server {spec.name!r} did not prove itself on {endpoint} in time")

    def stop(self, *, name: str, handle: str) -> None:
        pid = int(handle)
        if not _is_agent_server(pid):
            _children.pop(pid, None)
            return
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        child = _children.pop(pid, None)
        while time.monotonic() < deadline:
            if child is not None and child.poll() is not None:
                break
            if child is None and _has_exited(pid):
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            if child is not None:
                child.wait(timeout=STOP_TIMEOUT)
        logger.info("agent %s stopped (pid %s)", name, pid)

    def is_alive(self, *, name: str, handle: str) -> bool:
        try:
            pid = int(handle)
        except ValueError:
            return False
        child = _children.get(pid)
        if child is not None and child.poll() is not None:
            _children.pop(pid, None)
            return False
        return _is_agent_server(pid)

    def forget_credentials(self, *, name: str) -> None:
        """Delete a token file an older agent server left (and any temp file beside
        it). Today's servers keep credentials in memory only: nothing else to delete."""
        for path in _token_files(_home_path(name)):
            path.unlink(missing_ok=True)

    def discard(self, *, name: str) -> None:
        """Delete everything the agent left: the token file first (so a failure later
        cannot leave the secret behind), then its whole home with .env and log, its
        work area, and (as root) its OS user, every process of it killed first.

        Call it after the server stopped. Missing files or user are not an error.
        """
        home = _home_path(name)
        agents_dir = Path(settings.VAR_DIR) / "agents"
        # Agent names are slugs; refuse anything that would not delete a child of
        # var/agents/ (rmtree itself never follows a symlink inside the tree).
        if home.parent != agents_dir or home.is_symlink():
            raise ValueError(f"refusing to delete {home}: not an agent home")
        self.forget_credentials(name=name)
        if home.exists():
            shutil.rmtree(home)
        area = _area_path(name)
        if area.parent == work_root() and not area.is_symlink() and area.exists():
            # rmtree never follows the symlinks an agent may have left in its area.
            shutil.rmtree(area)
        with contextlib.suppress(RuntimeError):
            path = socket_path(name)
            path.unlink(missing_ok=True)
            path.with_name(f"{path.name}.lock").unlink(missing_ok=True)
        # Last: its processes die with it, and nothing of the agent's is left to own.
        os_user_remove(name)
        logger.info("agent %s: home, work area and OS user removed", name)
