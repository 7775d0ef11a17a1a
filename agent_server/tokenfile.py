"""Write the agent's OAuth token file atomically, private from its first byte."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE_MODE = 0o600


def write_token_file(path: Path, token: str) -> None:
    """Replace `path` with `token`, mode 0600, atomically.

    The temp file is created with O_CREAT|O_EXCL at mode 0600, so no window exists in
    which another user could open it (create-then-chmod leaves one), and O_EXCL with
    O_NOFOLLOW refuses a planted file or symlink. A umask can only narrow 0600, never
    widen it, so no chmod follows. `os.replace` makes readers see the old token or the
    new one, never a torn file.
    Raises OSError if the directory cannot be written.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, TOKEN_FILE_MODE)
    try:
        data = token.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
