"""The one secret create the proxy forwards: an agent's environment, as the swarm
runtime stores it (agents/runtimes/swarm.py ``_create_secret``).

Its name starts with the agent prefix, its labels are an agent's, and its data is
base64 (the engine decodes it); no driver and no templating (a templated secret reads
other secrets and configs into it). A secret's data is the agent's credentials: no
reason quotes it.
"""

from __future__ import annotations

import re

from .agent import agent_labels, agent_name
from .fields import Reader, matching, struct
from .policy import Policy

_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def secret_reader(policy: Policy) -> Reader:
    """The reader of a ``POST /secrets/create`` body for ``policy``."""
    return struct(
        {
            "Name": agent_name(policy),
            "Labels": agent_labels(policy),
            "Data": matching(_BASE64, "base64"),
        },
        required=("Name", "Labels", "Data"),
    )
