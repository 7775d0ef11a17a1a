"""The server's environment from a file: `TRINITY_AGENT_ENV_FILE`.

A swarm service carries no secret in its environment or labels (anyone who may
inspect the service reads them), so the swarm runtime writes the server's whole
baseline environment, the shared secret and the credentials included, as one JSON
object of names to strings into a swarm secret, which the engine mounts in the
container (`/run/secrets/trinity-agent-env`, root's, 0400). The service's own
environment only names that file.

At boot, before the configuration is read, the file's values become this process's
environment and win over what the process was started with: from there on the server
is as it would be had it been started with them (the CLI's environment is layered
from this one, `agent_server/envlayer.py`, and gets no more of it than before).

The file is refused, with a message naming it and what is wrong, when it is missing,
unreadable, readable or writable by another user (its values are the agent's
secrets, and the agent user runs beside the server), not JSON, or not an object of
strings. No message quotes a value, or a name that is not one: a malformed file may
hold a credential anywhere.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import MutableMapping
from pathlib import Path
from typing import Final

ENV_FILE_VAR: Final = "TRINITY_AGENT_ENV_FILE"
# A swarm secret holds at most 500 KB; an environment many times the usual one.
MAX_BYTES: Final = 1024 * 1024
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvFileError(Exception):
    """The environment file cannot be used; the message names it and the fault."""


def env_file_apply(environ: MutableMapping[str, str]) -> Path | None:
    """When `environ` names an environment file, put its values into `environ` (they
    win) and return its path; None when none is named. Raises EnvFileError."""
    raw = environ.get(ENV_FILE_VAR, "").strip()
    if not raw:
        return None
    path = Path(raw)
    if not path.is_absolute():
        raise EnvFileError(f"{ENV_FILE_VAR}={raw!r} is not an absolute path")
    environ.update(env_file_read(path))
    return path


def env_file_read(path: Path) -> dict[str, str]:
    """The names and values of the JSON object in `path`. Raises EnvFileError."""
    text = _read_private(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # Position only: the decoder's message may quote the text around the fault.
        raise EnvFileError(
            f"{path}: not JSON (invalid at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise EnvFileError(f"{path}: not a JSON object of names to strings ({_kind(data)})")
    values: dict[str, str] = {}
    for index, (name, value) in enumerate(data.items(), start=1):
        if not _NAME.fullmatch(name):
            raise EnvFileError(
                f"{path}: entry {index}: its name is not an environment variable name"
            )
        if not isinstance(value, str):
            raise EnvFileError(f"{path}: {name}: the value is {_kind(value)}, not a string")
        if "\0" in value:
            raise EnvFileError(f"{path}: {name}: the value holds a NUL character")
        values[name] = value
    return values


def _read_private(path: Path) -> str:
    """The text of `path`, a regular file only its owner (this process's user) may
    read or write. Raises EnvFileError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise EnvFileError(f"{path}: missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvFileError(f"{path}: a symbolic link, not the file itself") from None
        raise EnvFileError(f"{path}: unreadable ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise EnvFileError(f"{path}: not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise EnvFileError(
                f"{path}: owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}; it "
                f"must be uid {os.geteuid()}'s alone (0400 or 0600): it holds secrets"
            )
        data = _read_at_most(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise EnvFileError(f"{path}: unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise EnvFileError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvFileError(f"{path}: not UTF-8 text (at byte {exc.start})") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kind(value: object) -> str:
    """What a JSON value is, never the value."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return "a string"
