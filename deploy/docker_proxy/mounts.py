"""An agent's mounts: the writable places on its read-only root, and nothing else.

Both runtimes mount the work area as one anonymous volume: no source, no volume,
bind or tmpfs options (a local-driver option can bind any host path). A swarm
service has no HostConfig.Tmpfs, so it mounts its tmpfs as mounts too: at the agent's
tmpfs targets, with a size and a mode only (the engine mounts a tmpfs of type tmpfs
noexec, nosuid and nodev). Each target is mounted once.
"""

from __future__ import annotations

from typing import Any

from .fields import Reader, empty, exactly, file_mode, one_of, positive_int, struct
from .policy import AGENT_TMPFS, AGENT_WORK_AREA, Refused

WORK_AREA_MOUNT = struct(
    {
        "Type": exactly("volume"),
        "Target": exactly(AGENT_WORK_AREA),
        "Source": empty,
        "ReadOnly": exactly(False),
    },
    required=("Type", "Target"),
)
TMPFS_MOUNT = struct(
    {
        "Type": exactly("tmpfs"),
        "Target": one_of(*sorted(AGENT_TMPFS)),
        "TmpfsOptions": struct({"SizeBytes": positive_int, "Mode": file_mode}),
    },
    required=("Type", "Target"),
)


def _type(mount: Any, where: str) -> str:
    """The mount's Type, its key in any case (gojson refused two keys equal but for
    case, so there is one)."""
    if not isinstance(mount, dict):
        raise Refused(f"{where} is not an object")
    kinds = [value for key, value in mount.items() if key.lower() == "type"]
    return kinds[0] if kinds and isinstance(kinds[0], str) else ""


def agent_mounts(*, tmpfs: bool) -> Reader:
    """The reader of a Mounts list: the work area's volume and, when ``tmpfs``, the
    agent's tmpfs mounts; each target at most once."""
    kinds = {"volume": WORK_AREA_MOUNT, **({"tmpfs": TMPFS_MOUNT} if tmpfs else {})}

    def read(value: Any, where: str) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise Refused(f"{where} is not a list")
        rebuilt = []
        for i, mount in enumerate(value):
            reader = kinds.get(_type(mount, f"{where}[{i}]"))
            if reader is None:
                allowed = " or ".join(sorted(kinds))
                raise Refused(f"{where}[{i}] must be a mount of type {allowed} for an agent")
            rebuilt.append(reader(mount, f"{where}[{i}]"))
        targets = [mount["Target"] for mount in rebuilt]
        if len(set(targets)) != len(targets):
            raise Refused(f"{where} mounts one target twice")
        return rebuilt

    return read
