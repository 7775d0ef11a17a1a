"""The one container create the proxy forwards: an agent's, rebuilt.

``create_reader(policy)`` reads a create body (already parsed by gojson) against the
exact fields agents/runtimes/docker.py sends through the docker SDK and returns the
body to forward, built from what it read, in canonical case. Anything else is refused:
a field the runtime does not send (Binds, Privileged, Devices, PidMode, Volumes,
PortBindings, User...), a value it would not send, or a missing hardening: every
agent container drops every capability but AGENT_CAPABILITIES and the egress guard's
GUARD_CAPABILITIES (which its server drops before it serves), sets no-new-privileges
and a read-only root, and has memory, CPU and process limits. No security option but
no-new-privileges passes, so the engine's default seccomp profile applies.
"""

from __future__ import annotations

import re
from typing import Any

from .agent import agent_labels
from .fields import DROP, Reader, exactly, one_of, positive_int, struct, subset, texts
from .mounts import agent_mounts
from .policy import (
    AGENT_CAPABILITIES,
    AGENT_TMPFS,
    GUARD_CAPABILITIES,
    NO_NEW_PRIVILEGES,
    Policy,
    Refused,
    shown,
)

# tmpfs options an agent's mount may carry; suid and dev are not among them, and
# nosuid and nodev must be there (a later option overrides an earlier one).
_TMPFS_OPTION = re.compile(r"rw|exec|noexec|nosuid|nodev|size=[0-9]{1,12}[kmg]?|mode=[0-7]{3,4}")
_TMPFS_REQUIRED = frozenset({"nosuid", "nodev"})
# The SDK sets these to false on every create; the engine would attach a terminal or
# stdin otherwise, which no agent has.
_FALSE_FLAGS = (
    "Tty",
    "OpenStdin",
    "StdinOnce",
    "AttachStdin",
    "AttachStdout",
    "AttachStderr",
    "NetworkDisabled",
)


def _tmpfs(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise Refused(f"{where} is not a map")
    for target, options in value.items():
        if target not in AGENT_TMPFS:
            raise Refused(f"{where}.{shown(target)} is not an agent container's tmpfs")
        tokens = options.split(",") if isinstance(options, str) else []
        if not tokens or not all(_TMPFS_OPTION.fullmatch(token) for token in tokens):
            raise Refused(f"{where}.{target} holds an option an agent's tmpfs may not have")
        if not _TMPFS_REQUIRED <= set(tokens):
            raise Refused(f"{where}.{target} must be nosuid and nodev")
    return dict(value)


def _networking(policy: Policy) -> Reader:
    """The SDK sends ``{<network>: null}`` here, which the engine ignores (no such
    field): the network is HostConfig.NetworkMode. That shape, or none, is taken and
    dropped; an EndpointsConfig (in any case) would put the container on a network
    of its choosing, so none is."""

    def read(value: Any, where: str) -> object:
        if value is not None and value != {policy.network: None} and value != {}:
            raise Refused(f"an agent container joins the {policy.network!r} network only")
        return DROP

    return read


def _host_config(policy: Policy) -> Reader:
    return struct(
        {
            "NetworkMode": exactly(policy.network),
            "RestartPolicy": struct(
                {"Name": one_of("no", ""), "MaximumRetryCount": exactly(0)}, required=("Name",)
            ),
            "Memory": positive_int,
            "NanoCpus": positive_int,
            "PidsLimit": positive_int,
            "CapDrop": exactly(["ALL"]),
            "CapAdd": subset(AGENT_CAPABILITIES | GUARD_CAPABILITIES),
            "SecurityOpt": exactly([NO_NEW_PRIVILEGES]),
            "ReadonlyRootfs": exactly(True),
            "Tmpfs": _tmpfs,
            "Mounts": agent_mounts(tmpfs=False),
        },
        required=(
            "NetworkMode",
            "Memory",
            "NanoCpus",
            "PidsLimit",
            "CapDrop",
            "SecurityOpt",
            "ReadonlyRootfs",
        ),
    )


def create_reader(policy: Policy) -> Reader:
    """The reader of a whole create body for ``policy`` (see the module docstring)."""
    fields: dict[str, Reader] = {
        "Image": exactly(policy.image),
        "Cmd": texts,
        "Env": texts,
        "Labels": agent_labels(policy),
        "HostConfig": _host_config(policy),
        "NetworkingConfig": _networking(policy),
    }
    fields.update({flag: exactly(False) for flag in _FALSE_FLAGS})
    return struct(fields, required=("Image", "Labels", "HostConfig"))
