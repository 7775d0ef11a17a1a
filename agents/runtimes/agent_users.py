"""One OS user per local agent: named, created and removed by the local runtime.

When the platform runs as root, each local agent's CLI runs as a user of its own, so
one agent's tools can neither read another's files and live processes nor signal
them. The name (at most 32 characters, what `useradd` accepts) is derived from the
agent's runtime key (a unique slug of at most 100 characters, stable for the agent's
life) and an installation tag (a digest of VAR_DIR, as the default work root is), so
two checkouts or two test runs on one machine never share a user:

    ta<tag, 6 hex>-<digest of tag and key, 16 hex>

Opaque on purpose: `/etc/passwd` is readable by every agent's code (bound into each
sandbox, where the CLI's tools look up users), and a runtime key is, for most agents,
their owner's name for them; nothing in it may tell one operator's agent the names of
another's. The user's comment field says whose it is (`Trinity agent <tag> <the same
digest>`): an existing user of that name is taken only with that exact comment, and
only such a user is ever removed, so a user someone else made is refused, never shared.

Creation is idempotent and safe against a concurrent start of the same agent (two
platform processes): `useradd` checks the name before it takes the password files'
lock, so two racing calls would both add it (seen here: one name, two uids). Every
change is therefore made under an exclusive `flock` of `LOCK_FILE` (root's /run, so
no local user can hold it), and the name is looked up again once it is held.
Removal kills every process of the user first (`userdel` refuses a user with live
processes), then deletes the user and its group.

Their ids come from a range of their own (`AGENT_ID_MIN`..`AGENT_ID_MAX`), far above
the system range: containers on the same host run their images' system users
(uid 999 and below) without a user namespace, so an agent user allocated there would
share a uid with, say, the backend image's `trinity` or a database container's user,
and killing every process of the agent's uid would kill those too. `--no-log-init`
keeps `useradd` from growing lastlog/faillog to a sparse file sized by the uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from agent_server.isolation import AgentUser, uid_processes_kill

logger = logging.getLogger(__name__)

NAME_MAX: Final = 32
LOCK_FILE: Final = "/run/trinity-agent-users.lock"
PREFIX: Final = "ta"
COMMENT_PREFIX: Final = "Trinity agent"
# useradd's exit statuses: 9 the name is taken, 10 the password files are locked.
_NAME_TAKEN: Final = 9
_LOCKED: Final = 10
_LOCK_TRIES: Final = 20
_LOCK_WAIT: Final = 0.05
# The ids agent users (and their groups) are given: below 2**31, above the system,
# login and subordinate-id (from 100000, 65536 per user) ranges a host hands out.
AGENT_ID_MIN: Final = 1_900_000_000
AGENT_ID_MAX: Final = 1_909_999_999
_ID_RANGE: Final = tuple(
    arg
    for kind in ("UID", "GID")
    for arg in ("-K", f"SYS_{kind}_MIN={AGENT_ID_MIN}", "-K", f"SYS_{kind}_MAX={AGENT_ID_MAX}")
)


class AgentUserError(RuntimeError):
    """The agent's user cannot be made, or one that is not this agent's holds its name."""


def installation_tag(var_dir: Path) -> str:
    """Twelve hex digits naming this installation (its VAR_DIR) on this machine."""
    return hashlib.sha256(str(var_dir.resolve()).encode()).hexdigest()[:12]


def _key_digest(*, key: str, tag: str) -> str:
    return hashlib.sha256(f"{tag}/{key}".encode()).hexdigest()[:16]


def agent_user_name(*, key: str, tag: str) -> str:
    """The OS user name for the agent with runtime key `key` in installation `tag`:
    nothing of the key readable in it (the module docstring says why)."""
    name = f"{PREFIX}{tag[:6]}-{_key_digest(key=key, tag=tag)}"
    assert len(name) <= NAME_MAX
    return name


def agent_user_comment(*, key: str, tag: str) -> str:
    """The comment that marks the user as this agent's (no key in it either)."""
    return f"{COMMENT_PREFIX} {tag} {_key_digest(key=key, tag=tag)}"


@contextlib.contextmanager
def _users_locked() -> Iterator[None]:
    """Hold the machine-wide lock of agent user changes (across processes)."""
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def agent_user_ensure(*, name: str, comment: str) -> AgentUser:
    """The user `name`, created (with a group of its own, no home, no login shell)
    if it does not exist. Raises AgentUserError when `useradd` fails for another
    reason, or when the existing user is not the one `comment` describes."""
    existing = _lookup(name)
    if existing is not None:  # the common case: no lock needed to read
        return _checked(existing, comment)
    with _users_locked():
        return _ensure_locked(name=name, comment=comment)


def _ensure_locked(*, name: str, comment: str) -> AgentUser:
    for _ in range(_LOCK_TRIES):
        existing = _lookup(name)
        if existing is not None:
            return _checked(existing, comment)
        done = subprocess.run(  # noqa: S603 - fixed argv, a validated name
            [
                _tool("useradd"),
                "--system",
                "--user-group",
                "--no-create-home",
                "--no-log-init",
                *_ID_RANGE,
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--comment",
                comment,
                name,
            ],
            capture_output=True,
            check=False,
        )
        if done.returncode in (0, _NAME_TAKEN):
            continue  # ours, or a concurrent start's: the lookup above decides
        if done.returncode != _LOCKED:
            said = done.stderr.decode("utf-8", "replace").strip()
            raise AgentUserError(f"cannot create the agent's OS user {name}: {said}")
        time.sleep(_LOCK_WAIT)  # another useradd holds the password files: retry
    raise AgentUserError(f"cannot create the agent's OS user {name}: password files stay locked")


def agent_user_remove(*, name: str, comment: str) -> bool:
    """Kill every process of the user `name` and delete it (and its group). Returns
    False when there is no such user; a user that is not this agent's is left alone
    (AgentUserError)."""
    with _users_locked():
        entry = _lookup(name)
        if entry is None:
            return False
        return _remove_locked(_checked(entry, comment))


def _remove_locked(user: AgentUser) -> bool:
    name = user.name
    for _ in range(_LOCK_TRIES):
        uid_processes_kill(user)
        done = subprocess.run(  # noqa: S603 - fixed argv, a validated name
            [_tool("userdel"), name], capture_output=True, check=False
        )
        if done.returncode == 0 or _lookup(name) is None:
            logger.info("agent user %s removed", name)
            return True
        time.sleep(_LOCK_WAIT)  # a process forked meanwhile, or the files are locked
    said = done.stderr.decode("utf-8", "replace").strip()
    raise AgentUserError(f"cannot remove the agent's OS user {name}: {said}")


def agent_users_of(tag: str) -> list[str]:
    """The names of every agent user installation `tag` made (by their comment)."""
    marker = f"{COMMENT_PREFIX} {tag} "
    return [entry.pw_name for entry in pwd.getpwall() if entry.pw_gecos.startswith(marker)]


def _tool(name: str) -> str:
    """useradd/userdel by absolute path (shadow's tools live in /usr/sbin, which a
    service's PATH may lack)."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or name


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _checked(entry: pwd.struct_passwd, comment: str) -> AgentUser:
    if entry.pw_gecos != comment:
        raise AgentUserError(
            f"the OS user {entry.pw_name} exists but is not this agent's "
            f"(its comment is {entry.pw_gecos!r}); refusing to share it"
        )
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise AgentUserError(f"the OS user {entry.pw_name} is privileged (uid/gid 0)")
    return AgentUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)
