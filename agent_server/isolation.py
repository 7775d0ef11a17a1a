"""The agent's OS user and the places it may touch.

When the agent server runs as root, the CLI (and every tool it runs) runs as an
unprivileged user of its own (`TRINITY_AGENT_USER`: on the local runtime one user per
agent, made by the platform, `agents/runtimes/agent_users.py`; in the agent image,
the container's `trinity-agent`): it cannot read the server's `/proc/<pid>/environ`,
its state directory or `var/`. Where the host allows it, the CLI also runs in a
sandbox (`agent_server/sandbox.py`, isolation `sandbox`); otherwise everything that
user runs is killed once no turn is running (`uid_processes_kill`). When the server
is not root both run as one user and the server says so (`same-user`, the weak mode).

The agent's work area (`TRINITY_AGENT_WORK_AREA`) is laid out as

    <area>/          owned by the server, group the agent's, 0710: the agent (and no
                     other user) may pass, not list or write
    <area>/work/     owned by the agent user, 0700: the CLI's working directory
    <area>/homes/    owned by the server, group the agent's, 0710: one HOME per spawn
                     or chat session, each owned by the agent user, 0700

so the server never creates or removes anything inside a directory the agent could
have filled with symlinks. None of it holds a secret.

The pinned CLI binary may sit in a checkout under a directory the agent user cannot
enter (a CI clone under a root-only path). In separate-user mode it is staged into a
cache the agent can reach: hard-linked (same inode, no copy) when the filesystem
allows, else copied; the staged name carries the source's size and mtime, so a new
CLI version is staged once and an unchanged one never again.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

Isolation = Literal["sandbox", "separate-user", "same-user"]
DEFAULT_AGENT_USER: Final = "trinity-agent"
# Files the CLI and its tools create are theirs alone.
AGENT_UMASK: Final = 0o077


class IsolationError(Exception):
    """A directory or user the isolation needs is missing or not safe to use."""


@dataclass(frozen=True)
class AgentUser:
    """The OS user the CLI runs as (separate-user mode)."""

    name: str
    uid: int
    gid: int


def resolve_agent_user(name: str) -> AgentUser:
    """Look `name` up; raises IsolationError naming the fix when it does not exist."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise IsolationError(
            f"the agent user {name!r} does not exist; create it with `make setup` (as root) or "
            f"`useradd --system --no-create-home --shell /usr/sbin/nologin {name}`, or set "
            "TRINITY_AGENT_USER to an existing unprivileged user"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise IsolationError(f"the agent user {name!r} is privileged (uid/gid 0)")
    return AgentUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def own_dir(path: Path, *, mode: int, group: int | None = None) -> None:
    """Make `path` a directory of this process's user with exactly `mode` (and group
    `group`, when given).

    An existing entry must be a real directory (not a symlink) owned by this user:
    anything else may have been planted by someone else and is refused.
    """
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=mode)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise IsolationError(f"{path} is not a directory owned by uid {os.geteuid()}")
    if group is not None and info.st_gid != group:
        os.chown(path, -1, group, follow_symlinks=False)
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)


def agent_dir(path: Path, user: AgentUser | None) -> None:
    """A 0700 directory the agent user owns, under a parent only the server writes."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise IsolationError(f"{path} is not a directory")
    if user is not None and (info.st_uid, info.st_gid) != (user.uid, user.gid):
        os.chown(path, user.uid, user.gid, follow_symlinks=False)


@dataclass(frozen=True)
class WorkArea:
    root: Path
    ephemeral: bool = False

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    @property
    def homes(self) -> Path:
        return self.root / "homes"


def work_area_prepare(root: Path | None, user: AgentUser | None) -> WorkArea:
    """Create (or check) the work area's layout; None makes a private temporary one.

    Passable by the agent's group alone (0710) when it is another user, so another
    agent's user cannot even enter it; private (0700) otherwise.
    """
    passable = 0o710 if user is not None else 0o700
    group = user.gid if user is not None else None
    ephemeral = root is None
    if root is None:
        # An unpredictable name made by mkdtemp (O_EXCL): no one can have planted it.
        root = Path(tempfile.mkdtemp(prefix="trinity-agent-area-"))
    own_dir(root, mode=passable, group=group)
    own_dir(root / "homes", mode=passable, group=group)
    agent_dir(root / "work", user)
    return WorkArea(root=root, ephemeral=ephemeral)


def spawn_home_make(area: WorkArea, name: str, user: AgentUser | None) -> Path:
    home = area.homes / name
    agent_dir(home, user)
    return home


def default_cli_cache() -> Path:
    return Path(tempfile.gettempdir()) / f"trinity-cli-{os.geteuid()}"


def cli_stage(binary: str, cache: Path) -> str:
    """The path of `binary` inside `cache`, staged there if it is not yet.

    Returns `binary` unchanged when it names no file (a missing CLI is reported per
    turn, not at boot). Raises IsolationError if `cache` is not safe to use.
    """
    found = shutil.which(binary) if os.sep not in binary else binary
    if not found or not os.path.isfile(found):
        return binary
    source = Path(os.path.realpath(found))
    info = source.stat()
    own_dir(cache, mode=0o755)
    staged = cache / f"{source.name}-{info.st_size}-{info.st_mtime_ns}"
    with contextlib.suppress(FileNotFoundError):
        if staged.lstat().st_size == info.st_size and not staged.is_symlink():
            return str(staged)
    tmp = cache / f".{staged.name}.{secrets.token_hex(6)}.tmp"
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    # A hard link shares the source's inode: its mode is the source's (npm installs
    # the CLI 0755); a copy gets it set here. Either way the agent user may run it.
    if stat.S_IMODE(tmp.stat().st_mode) & 0o005 != 0o005:
        os.chmod(tmp, 0o755)  # noqa: S103 - an executable every user may run, by design
    os.replace(tmp, staged)
    return str(staged)


def uid_processes_kill(user: AgentUser) -> None:
    """SIGKILL every process of `user`: a shell started as that user (no groups) runs
    `kill -KILL -1`, which reaches exactly the processes that user may signal (its
    own) and never the caller. What a turn started outside a sandbox dies with it,
    whatever sessions or double forks it made. Raises IsolationError for a
    privileged user: as root, `kill -1` would kill every process of the host.
    """
    if user.uid == 0 or user.gid == 0:
        raise IsolationError(f"refusing to kill every process of privileged user {user.name!r}")
    for _ in range(2):  # a second pass takes a child forked while the first ran
        subprocess.run(  # noqa: S603 - fixed argv, run as the unprivileged agent user
            ["/bin/sh", "-c", "kill -KILL -1 2>/dev/null; exit 0"],
            user=user.uid,
            group=user.gid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
