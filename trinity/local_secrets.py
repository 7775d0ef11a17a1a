"""Secrets generated on first run for the embedded default (nothing configured).

The files live under var/ (0700) and are created with mode 0600 at open: a file that
is created and chmod-ed afterwards is world-readable for a moment. An installation made
before var/ was private is tightened at startup (``ensure_private_var_dir``).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def read_or_create(path: Path, generate: Callable[[], str]) -> str:
    """Return the secret stored at ``path``, creating it (0600) on first use.

    Processes starting together (web, worker and beat under one `make run`) race here.
    The secret is written whole to a private temporary file and then hard-linked into
    place, which fails if ``path`` exists: so ``path`` never exists half-written, one
    process wins, and every other one reads what the winner wrote. Raises RuntimeError
    when ``path`` exists but is empty (it was truncated; a fresh secret would silently
    replace the one the stored data was made with).
    """
    path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    try:
        return _stored(path)
    except FileNotFoundError:
        pass
    value = generate()
    fd, written = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(value + "\n")
        try:
            os.link(written, path)
        except FileExistsError:
            return _stored(path)
        return value
    finally:
        os.unlink(written)


def _stored(path: Path) -> str:
    value = path.read_text().strip()
    if not value:
        raise RuntimeError(f"{path} is empty; delete it to generate a new secret")
    return value


def tighten(path: Path, mode: int) -> bool:
    """chmod ``path`` to ``mode`` when it grants more than that; True when it changed.

    Never loosens, never follows a symlink (one planted in var/ must not redirect a
    chmod elsewhere), and a missing path is not an error.
    """
    try:
        current = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(current) or not stat.S_IMODE(current) & ~mode:
        return False
    os.chmod(path, stat.S_IMODE(current) & mode)
    return True


def ensure_private_var_dir(path: Path) -> list[str]:
    """Create ``path`` (var/) with mode 0700, or tighten it and the files directly in it
    (the generated secrets, the SQLite file and its journals, the demo's token) to 0700
    and 0600. Returns the names it tightened, for one log line at startup.

    Subdirectories are not walked: var/ being 0700 already keeps every other user out
    of them, and what lives in them (agent homes) belongs to their own owners.
    """
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    tightened = [str(path)] if tighten(path, PRIVATE_DIR_MODE) else []
    for entry in sorted(path.iterdir()):
        if entry.is_file() and not entry.is_symlink() and tighten(entry, PRIVATE_FILE_MODE):
            tightened.append(entry.name)
    return tightened


def create_private_file(path: Path) -> None:
    """Create an empty ``path`` with mode 0600 unless it exists (for a file another
    library creates with the umask's mode, e.g. SQLite, which then gives its -wal and
    -shm files the database file's mode)."""
    path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except FileExistsError:
        pass


def tighten_sqlite_files(database: str) -> list[str]:
    """Tighten an SQLite database file and its -wal/-shm/-journal to 0600; returns the
    names it changed. For a file made before this release, or by a test runner."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return []
    base = Path(database)
    journals = [base.with_name(base.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
    return [path.name for path in (base, *journals) if tighten(path, PRIVATE_FILE_MODE)]
