"""The token file is private from the instant it exists, and replaced atomically."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_server.tokenfile import write_token_file

# Audit hooks cannot be removed, so one hook is installed for the session and only
# records while a test has set a target directory. It observes the real calls
# without patching anything: the open flags, any chmod (by path or by descriptor),
# and the temp file's mode at the instant before it is renamed into place.
_events: list[tuple[str, tuple[Any, ...]]] = []
_watch: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _watch or event not in {"open", "os.chmod", "os.rename"}:
        return
    target = args[0]
    if event == "os.chmod" and isinstance(target, int):
        _events.append((event, args))  # fchmod on some descriptor
        return
    if not isinstance(target, str | bytes | os.PathLike):
        return
    if not os.fsdecode(target).startswith(_watch[0]):
        return
    if event == "os.rename":
        _events.append((event, (target, stat.S_IMODE(os.stat(target).st_mode))))
    else:
        _events.append((event, args))


sys.addaudithook(_audit)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    _events.clear()
    _watch[:] = [str(tmp_path)]
    try:
        yield _events
    finally:
        _watch.clear()


def test_the_token_file_is_0600_even_under_a_permissive_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    path = tmp_path / ".trinity" / "oauth_token"
    write_token_file(path, "sk-ant-oat01-first")
    # Under umask 000 the mode on disk is exactly the mode os.open was given, and no
    # chmod follows: so 0600 here means the file was never wider.
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == "sk-ant-oat01-first"


def test_the_temp_file_is_created_exclusive_at_0600_and_never_chmodded(
    tmp_path: Path,
    permissive_umask: None,
    audited: list[tuple[str, tuple[Any, ...]]],
) -> None:
    path = tmp_path / "oauth_token"
    write_token_file(path, "sk-ant-oat01-second")

    opens = [args for event, args in audited if event == "open"]
    assert len(opens) == 1
    opened_path, _, flags = opens[0]
    assert os.fsdecode(opened_path) != str(path)  # a temp file, renamed into place
    assert flags & os.O_CREAT and flags & os.O_EXCL and flags & os.O_WRONLY
    assert not [event for event, _ in audited if event == "os.chmod"]
    # the written temp file, just before the rename, under umask 000: already 0600
    renames = [args for event, args in audited if event == "os.rename"]
    assert renames == [(opened_path, 0o600)]


def test_rewriting_replaces_the_token_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "oauth_token"
    write_token_file(path, "sk-ant-oat01-old")
    write_token_file(path, "sk-ant-oat01-new")
    assert path.read_text() == "sk-ant-oat01-new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oauth_token"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
