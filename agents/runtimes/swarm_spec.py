"""The swarm service an agent's server runs as: its name and its whole create body.

One replica of the agent image, the same limits and hardening as the docker runtime's
container (agents/runtimes/docker.py: every capability dropped but the server's few,
a read-only root with the same writable places, memory, CPU and process limits), and:

- **its secret as a swarm secret**: the server's whole baseline environment (the
  agent's secret and its credentials) is one JSON secret, mounted root-only at
  ``ENV_FILE``; the service's environment and labels carry no secret, so ``docker
  service inspect`` shows none (the server reads the file at boot,
  agent_server/envfile.py);
- **the egress guard**: the server starts with NET_ADMIN and SETPCAP, fences the
  agent's user off every private address (Postgres, Redis, the platform, the other
  agents), drops both and sets no-new-privileges before it serves (agent_server/egress.py),
  which a swarm service of engine 20.10 cannot set itself (the docker runtime runs
  the same guard);
- **placement** by resources (a reservation the scheduler counts) and constraints:
  the platform's (TRINITY_SWARM_CONSTRAINTS) and the agent's own node labels;
- **restart policy none**: a dead server stays down and the platform revives it on the
  credentials the agent should have now (the docker runtime's module docstring says
  why), on whichever node the scheduler picks.

The body is the Engine API's (v1.41), sent as it is by the low-level client, so
deploy/docker_proxy reads exactly these fields (tests pin that it passes).
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import (
    CAPABILITIES,
    CONTAINER_PORT,
    GUARD_CAPABILITIES,
    LABEL,
    SERVER_HOME,
    START_LABEL,
    TMPFS,
    WORK_AREA,
    guard_env,
)
from trinity.node_labels import swarm_constraints

ENV_SECRET_FILE = "trinity-agent-env"  # noqa: S105 - a file name
ENV_FILE = f"/run/secrets/{ENV_SECRET_FILE}"
STOP_GRACE_NS = 10 * 1_000_000_000
# Swarm names (services, secrets) are DNS labels: at most 63 characters.
NAME_LIMIT = 63
SERVICE_PREFIX = "trinity-agent-"


def service_name(key: str) -> str:
    """The agent's service name, the exclusive claim on its server: the runtime key
    when it fits a DNS label, else its head and a hash of the whole (still unique)."""
    name = f"{SERVICE_PREFIX}{key}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{name[: NAME_LIMIT - 13]}-{digest}"


def secret_name(key: str, start_id: str) -> str:
    """A new secret per start (swarm secrets cannot change): the service's name and
    the start's id."""
    return f"{service_name(key)[: NAME_LIMIT - len(start_id) - 1]}-{start_id}"


def tmpfs_mounts() -> list[dict[str, Any]]:
    """The docker runtime's TMPFS as swarm mounts (size and mode; a swarm tmpfs mount
    is always noexec, nosuid and nodev, the engine's default for a mount of that type)."""
    mounts = []
    for target, options in TMPFS.items():
        found = dict(o.split("=", 1) for o in options.split(",") if "=" in o)
        mode = {"SizeBytes": memory_bytes(found["size"]), "Mode": int(found["mode"], 8)}
        mounts.append({"Type": "tmpfs", "Target": target, "TmpfsOptions": mode})
    return mounts


def memory_bytes(text: str) -> int:
    """A docker-style size (``2g``, ``512m``, ``1024k``, bytes) in bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    value = text.strip().lower().removesuffix("b")
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)


def constraints(placement: dict[str, str]) -> list[str]:
    """The platform's constraints, then one per node label the agent asks for."""
    fixed = [c.strip() for c in settings.TRINITY_SWARM_CONSTRAINTS.split(",") if c.strip()]
    return fixed + swarm_constraints(placement)


def endpoint_spec() -> dict[str, Any]:
    """DNS round robin: the service's name resolves to its one task's address, and to
    nothing once that task is gone (a revive then starts at once, not at a timeout).
    Published mode adds the server's port on the task's own node (host mode), for a
    platform that is not on the agents' network."""
    spec: dict[str, Any] = {"Mode": "dnsrr"}
    if settings.TRINITY_SWARM_ENDPOINT == "published":
        spec["Ports"] = [{"Protocol": "tcp", "TargetPort": CONTAINER_PORT, "PublishMode": "host"}]
    return spec


def container_spec(spec: SpawnSpec, secret: tuple[str, str], start_id: str) -> dict[str, Any]:
    secret_id, name = secret
    return {
        "Image": settings.TRINITY_AGENT_IMAGE,
        "Command": ["python", "-m", "agent_server"],
        "Args": ["--host", "0.0.0.0", "--port", str(CONTAINER_PORT)],  # noqa: S104 - agents' net
        "Env": [
            f"TRINITY_AGENT_ENV_FILE={ENV_FILE}",
            f"TRINITY_AGENT_HOME={SERVER_HOME}",
            *(f"{name}={value}" for name, value in guard_env().items()),
        ],
        "Labels": {LABEL: spec.name, START_LABEL: start_id},
        "ReadOnly": True,
        "Mounts": [
            *tmpfs_mounts(),
            {"Type": "volume", "Target": WORK_AREA},
        ],
        "Secrets": [
            {
                "File": {"Name": ENV_SECRET_FILE, "UID": "0", "GID": "0", "Mode": 0o400},
                "SecretID": secret_id,
                "SecretName": name,
            }
        ],
        "CapabilityDrop": ["ALL"],
        "CapabilityAdd": [*CAPABILITIES, *GUARD_CAPABILITIES],
        "StopGracePeriod": STOP_GRACE_NS,
    }


def service_body(
    spec: SpawnSpec, *, network: str, secret: tuple[str, str], start_id: str
) -> dict[str, Any]:
    """The whole ``POST /services/create`` body for ``spec``'s agent."""
    millicores = settings.TRINITY_AGENT_CPU_MILLICORES
    return {
        "Name": service_name(spec.name),
        "Labels": {LABEL: spec.name, START_LABEL: start_id},
        "TaskTemplate": {
            "ContainerSpec": container_spec(spec, secret, start_id),
            "Resources": {
                "Limits": {
                    "NanoCPUs": millicores * 1_000_000,
                    "MemoryBytes": memory_bytes(settings.TRINITY_AGENT_MEMORY_LIMIT),
                    "Pids": settings.TRINITY_AGENT_PIDS_LIMIT,
                },
                "Reservations": {
                    "NanoCPUs": settings.TRINITY_SWARM_CPU_RESERVATION_MILLICORES * 1_000_000,
                    "MemoryBytes": memory_bytes(settings.TRINITY_SWARM_MEMORY_RESERVATION),
                },
            },
            "RestartPolicy": {"Condition": "none", "MaxAttempts": 0},
            "Placement": {"Constraints": constraints(spec.placement)},
            "Networks": [{"Target": network}],
        },
        "Mode": {"Replicated": {"Replicas": 1}},
        "EndpointSpec": endpoint_spec(),
    }
