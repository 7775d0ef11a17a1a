"""What /proc says about processes the tests start (Linux): one reader for all."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class ProcStat(NamedTuple):
    pid: int
    state: str  # "R", "S", "Z" (a zombie), ...
    ppid: int


def proc_stat(pid: int) -> ProcStat | None:
    """The process's state and parent, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last ')'.
    fields = raw.rsplit(")", 1)[1].split()
    return ProcStat(pid, fields[0], int(fields[1]))


def children_of(pid: int) -> list[ProcStat]:
    """Every process whose parent is ``pid`` (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            if stat.ppid == pid:
                found.append(stat)
    return found


def descendants_of(pid: int) -> list[ProcStat]:
    """Every process below ``pid``, nearest first (zombies included): a sandboxed CLI
    runs below bwrap and the sandbox's init, not as a direct child of its server."""
    table = [
        stat
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None
    ]
    found: list[ProcStat] = []
    parents = {pid}
    while parents:
        level = [stat for stat in table if stat.ppid in parents]
        found += level
        parents = {stat.pid for stat in level}
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    stat = proc_stat(pid)
    return stat is not None and stat.state != "Z"


def processes_of_uid(uid: int) -> list[int]:
    """The live processes whose real uid is ``uid`` (a killed orphan may stay a zombie
    until init reaps it: it runs nothing, so it is left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            lines = (entry / "status").read_text().splitlines()
        except OSError:
            continue
        status = dict(line.split(":", 1) for line in lines if ":" in line)
        if int(status["Uid"].split()[0]) == uid and not status["State"].strip().startswith("Z"):
            found.append(int(entry.name))
    return found
