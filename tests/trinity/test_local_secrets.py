"""The embedded default's generated secrets: processes starting together agree on one.

`make run` starts web, worker and beat at once; each reads settings, and the first
run of each generates var/'s secrets. A process that found the file created but not
yet written read it empty and refused to start.
"""

from __future__ import annotations

import multiprocessing
import stat
import time
from pathlib import Path

import pytest

from trinity.local_secrets import read_or_create

RACERS = 12
ROUNDS = 20
SECRET = "s" * 44


def _slow_secret() -> str:
    # A slow generator widens the window between creating the file and writing it.
    time.sleep(0.01)
    return SECRET


def _race(path: str, start: multiprocessing.synchronize.Event, out: multiprocessing.Queue) -> None:
    start.wait()
    try:
        out.put(read_or_create(Path(path), _slow_secret))
    except RuntimeError as refused:
        out.put(f"refused: {refused}")


def test_processes_starting_together_all_read_the_one_secret(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"secret-{round_}"
        start, out = context.Event(), context.Queue()
        racers = [
            context.Process(target=_race, args=(str(path), start, out)) for _ in range(RACERS)
        ]
        for racer in racers:
            racer.start()
        start.set()
        answers = [out.get(timeout=30) for _ in racers]
        for racer in racers:
            racer.join(timeout=30)
        assert answers == [SECRET] * RACERS
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"secret-{i}" for i in range(ROUNDS)
    )


def test_a_stored_secret_is_read_back_and_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "var" / "secret"
    assert read_or_create(path, lambda: "first") == "first"
    assert read_or_create(path, lambda: "second") == "first"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_emptied_secret_is_refused_not_regenerated(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("")
    with pytest.raises(RuntimeError, match="is empty; delete it"):
        read_or_create(path, lambda: "fresh")
    assert path.read_text() == ""
