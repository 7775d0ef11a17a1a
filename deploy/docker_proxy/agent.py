"""What marks an engine object as an agent's, for every kind the runtimes make
(containers, swarm services and secrets): its name and its labels.

A name starts with the policy's prefix and follows the engine's rule for names; the
labels are a map of strings in the policy's namespace (``trinity.``) that holds the
agent label. An object carrying that label is one the proxy lets the runtime inspect,
act on and remove (owner.py); it gets it only by a create the proxy read.
"""

from __future__ import annotations

import re
from typing import Any

from .fields import Reader
from .policy import Policy, Refused, shown

# The engine's own rule for a container name (daemon/names.go), without its optional
# leading slash; swarm names (DNS labels) are narrower still, which the engine checks.
NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")


def is_agent_name(policy: Policy, value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(NAME.fullmatch(value))
        and value.startswith(policy.name_prefix)
    )


def agent_name(policy: Policy) -> Reader:
    """A name of an agent's object: the policy's prefix, then the engine's rule."""

    def read(value: Any, where: str) -> str:
        if not is_agent_name(policy, value):
            raise Refused(f"{where} must be a name that starts with {policy.name_prefix!r}")
        return str(value)

    return read


def agent_labels(policy: Policy) -> Reader:
    """An agent's labels: the agent label, and only labels in the policy's namespace."""

    def read(value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise Refused(f"{where} is not a map of strings")
        if policy.label not in value:
            raise Refused(f"{where} must hold the {policy.label!r} label of an agent")
        for key in value:
            if not key.startswith(policy.label_prefix):
                raise Refused(f"{where}.{shown(key)} is not an agent's label")
        return dict(value)

    return read
