"""The agents' network, as the swarm runtime finds it and, when allowed, makes it
(agents/runtimes/swarm.py ``agents_overlay``).

A lookup names the policy's network and nothing else; the engine matches a name
filter as a pattern (``trinity-agents`` also finds ``trinity-agents-old``), so the
answer is cut to the networks named exactly so. A create is that network as the
runtime makes it: an overlay, optionally encrypted, labelled as the agents', refused
when one of that name exists; not attachable (no standalone container joins it), not
internal, no IPAM of its own. In the stack ``docker stack deploy`` makes it and the
runtime never does (TRINITY_SWARM_NETWORK_CREATE=false).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from .engine import EngineAnswer, engine_read
from .fields import Reader, exactly, struct
from .policy import Policy, Refused


def _options(value: Any, where: str) -> dict[str, str]:
    if value not in ({}, {"encrypted": ""}):
        raise Refused(f"{where} may hold only the 'encrypted' option")
    return dict(value)


def network_reader(policy: Policy) -> Reader:
    """The reader of a ``POST /networks/create`` body for ``policy``."""
    return struct(
        {
            "Name": exactly(policy.network),
            "Driver": exactly("overlay"),
            "Options": _options,
            "CheckDuplicate": exactly(True),
            "Labels": exactly(policy.network_labels),
        },
        required=("Name", "Driver", "CheckDuplicate", "Labels"),
    )


def named_networks(policy: Policy, networks: Any) -> list[dict[str, Any]]:
    """Of a network list, the networks named exactly as the agents' network."""
    if not isinstance(networks, list):
        return []
    return [n for n in networks if isinstance(n, dict) and n.get("Name") == policy.network]


def only_the_agents_network(policy: Policy, answer: EngineAnswer) -> EngineAnswer:
    """A list answer cut to the agents' network (an error answer is relayed as is)."""
    if answer.status != 200:
        return answer
    kept = named_networks(policy, json.loads(answer.body))
    return EngineAnswer(answer.status, answer.headers, json.dumps(kept).encode())


def network_names(engine: str, policy: Policy) -> frozenset[str]:
    """What a service may name as its network: the agents' network's name and the id
    of each network so named (two may exist when two first starts raced)."""
    query = urlencode({"filters": network_filters(policy)})
    found = engine_read(engine, f"/networks?{query}") or []
    return frozenset({policy.network, *(str(n.get("Id")) for n in named_networks(policy, found))})


def network_filters(policy: Policy) -> str:
    """The filter a forwarded lookup carries: the agents' network's name."""
    return json.dumps({"name": {policy.network: True}}, separators=(",", ":"))
