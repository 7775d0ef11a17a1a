"""Secrets generated on first run for the embedded default (nothing configured).

The files live under var/ and are created with mode 0600 at open: a file that is
created and chmod-ed afterwards is world-readable for a moment.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def read_or_create(path: Path, generate: Callable[[], str]) -> str:
    """Return the secret stored at ``path``, creating it (0600) on first use.

    Two processes starting together may race; O_EXCL makes one of them win and the
    other read what the winner wrote.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        value = path.read_text().strip()
        if not value:
            raise RuntimeError(f"{path} is empty; delete it to generate a new secret") from None
        return value
    value = generate()
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value
