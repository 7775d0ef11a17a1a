"""Memory, CPU and process limits for an agent's sandboxed turns: one cgroup per server.

The Docker runtime limits a whole container (`mem_limit`, `nano_cpus`, `pids_limit`);
on the local runtime the same three settings (`TRINITY_AGENT_MEMORY_LIMIT`,
`TRINITY_AGENT_CPU_MILLICORES`, `TRINITY_AGENT_PIDS_LIMIT`, passed in the server's
spawn environment) bound one cgroup that every sandbox of this agent server joins
before it execs bubblewrap (`AgentCgroup.join`, run in the spawned child). Like a
container, the limit is the agent's, shared by its concurrent turns.

cgroup v2 is used when the controllers are available to this process's own cgroup
(they must be listed in its `cgroup.controllers` and enabled in its
`cgroup.subtree_control`, which a delegated cgroup allows); otherwise each controller
of cgroup v1 that is mounted and writable. The cgroup is made *under* this server's
own cgroup, never at a hierarchy's root, so it stays inside whatever bounds the
server itself was given. A controller that cannot be used is named in `missing`: the
limit is then not applied and the server says so (`isolation_missing` in /health).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
NAME_PREFIX: Final = "trinity-sandbox-"
CPU_PERIOD_US: Final = 100_000
_SIZE: Final = re.compile(r"(\d+)([bkmg]?)b?", re.IGNORECASE)
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class LimitError(ValueError):
    """A limit setting that is not a valid value."""


@dataclass(frozen=True)
class Limits:
    """What one agent's sandboxes may use together; None: no limit of that kind."""

    memory_bytes: int | None = None
    cpu_millicores: int | None = None
    pids: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.memory_bytes, self.cpu_millicores, self.pids))


def parse_memory(raw: str) -> int:
    """Docker's memory notation (`2g`, `512m`, `1048576`) in bytes; raises LimitError."""
    found = _SIZE.fullmatch(raw.strip())
    if found is None or int(found.group(1)) <= 0:
        raise LimitError(f"{raw!r} is not a memory size such as 2g, 512m or a byte count")
    return int(found.group(1)) * _UNITS[found.group(2).lower()]


@dataclass
class AgentCgroup:
    """The cgroup directories a sandbox joins (one per v1 controller, one on v2)."""

    directories: list[Path] = field(default_factory=list)

    def join(self) -> None:
        """Move the calling process into the cgroup; runs in a spawned child before
        it execs, so everything it starts is counted from its first instruction."""
        pid = str(os.getpid())
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(pid)

    def close(self) -> None:
        """Remove the cgroup once nothing is left in it (a busy one stays)."""
        for directory in self.directories:
            with contextlib.suppress(OSError):
                directory.rmdir()


def cgroup_make(limits: Limits, *, name: str) -> tuple[AgentCgroup | None, list[str]]:
    """A cgroup named `<prefix><name>-<pid>` applying `limits`, and what could not be
    applied (each a short phrase). (None, []) when no limit is asked for."""
    if not limits.any:
        return None, []
    leaf = f"{NAME_PREFIX}{name}-{os.getpid()}"
    own = _own_cgroups(Path("/proc/self/cgroup"))
    v2 = _v2_base(own)
    if v2 is not None:
        made = _make_v2(v2 / leaf, limits)
        if made is not None:
            return AgentCgroup([made]), []
    return _make_v1(own, leaf, limits)


def _own_cgroups(proc_file: Path) -> dict[str, str]:
    """This process's cgroup path per controller (v1 names; "" for the v2 line)."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in proc_file.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _v2_base(own: dict[str, str]) -> Path | None:
    """This process's own v2 cgroup directory, when it can hand the three controllers
    to a child (listed there and enabled in its subtree_control, or enabled now)."""
    if "" not in own:
        return None
    for mount in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        base = mount / own[""].lstrip("/")
        controllers = base / "cgroup.controllers"
        if not controllers.is_file():
            continue
        available = set(controllers.read_text().split())
        if not {"memory", "pids", "cpu"} <= available:
            return None
        try:
            (base / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        except OSError:
            # Not delegated to us (or processes live in our own cgroup): v1, or none.
            return None
        return base
    return None


def _make_v2(directory: Path, limits: Limits) -> Path | None:
    try:
        _fresh_dir(directory)
        if limits.memory_bytes is not None:
            (directory / "memory.max").write_text(str(limits.memory_bytes))
        if limits.pids is not None:
            (directory / "pids.max").write_text(str(limits.pids))
        if limits.cpu_millicores is not None:
            quota = limits.cpu_millicores * CPU_PERIOD_US // 1000
            (directory / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
    except OSError as exc:
        logger.warning("cgroup v2 at %s unusable: %s", directory, exc.strerror or exc)
        with contextlib.suppress(OSError):
            directory.rmdir()
        return None
    return directory


# v1: the controller, its limit's label, and the files it writes from the limits.
def _v1_files(limits: Limits) -> list[tuple[str, str, list[tuple[str, str]]]]:
    wanted: list[tuple[str, str, list[tuple[str, str]]]] = []
    if limits.memory_bytes is not None:
        wanted.append(("memory", "memory", [("memory.limit_in_bytes", str(limits.memory_bytes))]))
    if limits.pids is not None:
        wanted.append(("pids", "pids", [("pids.max", str(limits.pids))]))
    if limits.cpu_millicores is not None:
        quota = limits.cpu_millicores * CPU_PERIOD_US // 1000
        cpu = [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", str(quota))]
        wanted.append(("cpu", "CPU", cpu))
    return wanted


def _make_v1(
    own: dict[str, str], leaf: str, limits: Limits
) -> tuple[AgentCgroup | None, list[str]]:
    cgroup = AgentCgroup()
    missing: list[str] = []
    for controller, label, files in _v1_files(limits):
        base = CGROUP_ROOT / controller
        if controller not in own or not (base / "cgroup.procs").is_file():
            missing.append(f"{label} limit (no cgroup v2 or v1 {controller} controller)")
            continue
        directory = base / own[controller].lstrip("/") / leaf
        try:
            _fresh_dir(directory)
            for name, value in files:
                (directory / name).write_text(value)
        except OSError as exc:
            missing.append(f"{label} limit (cgroup {controller}: {exc.strerror or exc})")
            with contextlib.suppress(OSError):
                directory.rmdir()
            continue
        cgroup.directories.append(directory)
    return (cgroup if cgroup.directories else None), missing


def _fresh_dir(directory: Path) -> None:
    """Make the cgroup, first removing stale ones of servers that are gone."""
    _sweep(directory.parent)
    with contextlib.suppress(FileExistsError):
        directory.mkdir()


def _sweep(parent: Path) -> None:
    """rmdir the empty cgroups this module made for servers no longer running (a
    SIGKILLed server cannot remove its own); a busy one is left alone by the kernel."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if not entry.name.startswith(NAME_PREFIX):
                continue
            pid = entry.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()
