"""The one service create the proxy forwards: an agent's, rebuilt.

``service_reader(policy, networks)`` reads a ``POST /services/create`` body (already
parsed by gojson) against the exact fields agents/runtimes/swarm_spec.py sends and
returns the body to forward, built from what it read, in canonical case. It is the
container create's shape (create.py) in the swarm's words: the agent image and
labels; a read-only root whose writable places are the agent's tmpfs mounts and the
work area's anonymous volume; every capability dropped but the agent server's few and
the egress guard's two (which the server drops before it serves); memory, CPU and
process limits;
and, of the swarm's own fields:

- at most one secret, an agent's (``trinity-agent-`` name, a swarm id), as the
  root-only file the server reads its environment from (owner.py checks the engine
  says it is this agent's);
- restart policy none, one replica, DNS round robin with at most the server's port
  published on its task's node (host mode: no ingress port on every node);
- exactly one network, the agents' (``networks()``: its name and the ids the engine
  gives it);
- placement constraints, each one plain ``key==value`` or ``key!=value`` test on a
  node's id, name, role, platform or labels.

Anything else is refused (Privileges, Hosts, Sysctls, Isolation, Init, Ulimits,
Configs, bind mounts, placement preferences, update and rollback configs, a log
driver, a second network...), and no reason quotes the environment, a command, an id
or a name (names of fields, labels and capabilities only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from .agent import agent_labels, agent_name
from .fields import (
    Reader,
    exactly,
    list_of,
    matching,
    member,
    non_negative_int,
    positive_int,
    struct,
    subset,
    texts,
)
from .mounts import agent_mounts
from .policy import (
    AGENT_CAPABILITIES,
    AGENT_PORT,
    AGENT_SECRET_FILE,
    GUARD_CAPABILITIES,
    Policy,
)

# A swarm object's id: 25 characters of base 36 (swarmkit's identity.NewID).
SWARM_ID = re.compile(r"[0-9a-z]{25}")
# One test per constraint, on what a node is; the names and values of node labels are
# those trinity/node_labels.py allows and a little more (upper case in a name).
_CONSTRAINT = re.compile(
    r"(node\.(id|hostname|role|platform\.os|platform\.arch|labels\.[A-Za-z0-9._-]+)"
    r"|engine\.labels\.[A-Za-z0-9._-]+) *(==|!=) *[A-Za-z0-9._-]+"
)
MAX_CONSTRAINTS = 32


def _secret(policy: Policy) -> Reader:
    file = struct(
        {
            "Name": exactly(AGENT_SECRET_FILE),
            "UID": exactly("0"),
            "GID": exactly("0"),
            "Mode": exactly(0o400),
        },
        required=("Name", "UID", "GID", "Mode"),
    )
    return struct(
        {
            "File": file,
            "SecretID": matching(SWARM_ID, "a swarm id"),
            "SecretName": agent_name(policy),
        },
        required=("File", "SecretID", "SecretName"),
    )


def _container_spec(policy: Policy) -> Reader:
    return struct(
        {
            "Image": exactly(policy.image),
            "Command": texts,
            "Args": texts,
            "Env": texts,
            "Labels": agent_labels(policy),
            "ReadOnly": exactly(True),
            "Mounts": agent_mounts(tmpfs=True),
            "Secrets": list_of(_secret(policy), most=1),
            "CapabilityDrop": exactly(["ALL"]),
            "CapabilityAdd": subset(AGENT_CAPABILITIES | GUARD_CAPABILITIES),
            "StopGracePeriod": non_negative_int,
        },
        required=("Image", "ReadOnly", "CapabilityDrop"),
    )


_RESOURCES = struct(
    {
        "Limits": struct(
            {"NanoCPUs": positive_int, "MemoryBytes": positive_int, "Pids": positive_int},
            required=("NanoCPUs", "MemoryBytes", "Pids"),
        ),
        "Reservations": struct({"NanoCPUs": non_negative_int, "MemoryBytes": non_negative_int}),
    },
    required=("Limits",),
)
_RESTART_POLICY = struct(
    {"Condition": exactly("none"), "MaxAttempts": exactly(0)}, required=("Condition",)
)
_PLACEMENT = struct(
    {
        "Constraints": list_of(
            matching(_CONSTRAINT, "one test of a node (node.role==worker)"),
            most=MAX_CONSTRAINTS,
        )
    }
)
_MODE = struct(
    {"Replicated": struct({"Replicas": exactly(1)}, required=("Replicas",))},
    required=("Replicated",),
)
_PORT = struct(
    {"Protocol": exactly("tcp"), "TargetPort": exactly(AGENT_PORT), "PublishMode": exactly("host")},
    required=("Protocol", "TargetPort", "PublishMode"),
)
_ENDPOINT_SPEC = struct(
    {"Mode": exactly("dnsrr"), "Ports": list_of(_PORT, most=1)}, required=("Mode",)
)


def _task_template(policy: Policy, networks: Callable[[], Collection[str]]) -> Reader:
    attachment = struct(
        {"Target": member(networks, f"the agents' network {policy.network!r}")},
        required=("Target",),
    )
    return struct(
        {
            "ContainerSpec": _container_spec(policy),
            "Resources": _RESOURCES,
            "RestartPolicy": _RESTART_POLICY,
            "Placement": _PLACEMENT,
            "Networks": list_of(attachment, least=1, most=1),
        },
        required=("ContainerSpec", "Resources", "RestartPolicy", "Networks"),
    )


def service_reader(policy: Policy, networks: Callable[[], Collection[str]]) -> Reader:
    """The reader of a whole service create body for ``policy``; ``networks()`` names
    the agents' network as a service may (its name and ids), asked only when a body's
    network is read (the module docstring says what passes)."""
    return struct(
        {
            "Name": agent_name(policy),
            "Labels": agent_labels(policy),
            "TaskTemplate": _task_template(policy, networks),
            "Mode": _MODE,
            "EndpointSpec": _ENDPOINT_SPEC,
        },
        required=("Name", "Labels", "TaskTemplate", "Mode", "EndpointSpec"),
    )
