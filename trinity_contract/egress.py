"""The egress guard's allowance: private IPv4 destinations the agent user may still reach.

The guard (agent_server/egress.py) refuses the agent user every private address. An
operator whose agents' tools need one service on their network (a git server, a
package mirror) names it in ``TRINITY_AGENT_EGRESS_ALLOW``: comma-separated entries,
each an IPv4 address or network, with an optional TCP port (``10.2.0.5:443``,
``10.8.0.0/16``, ``192.168.1.0/24:22``). The platform checks the setting at startup
and hands it to each agent's server, which checks it again and lets those through
before its refusals. IPv6 stays closed: the guard gives the agent user none of it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final

VARIABLE: Final = "TRINITY_AGENT_EGRESS_ALLOW"
MAX_ENTRIES: Final = 32


@dataclass(frozen=True)
class EgressAllowance:
    """One allowed destination: a network, and a TCP port (None: any port, any protocol)."""

    network: ipaddress.IPv4Network
    port: int | None = None

    def __str__(self) -> str:
        return f"{self.network}:{self.port}" if self.port is not None else str(self.network)

    def rule(self, chain: str) -> str:
        """Its iptables line in ``chain``: back to OUTPUT's verdict (accept) for it."""
        match = f"-p tcp -m tcp --dport {self.port} " if self.port is not None else ""
        return f"-A {chain} -d {self.network} {match}-j RETURN"


def egress_allow_parse(text: str) -> tuple[EgressAllowance, ...]:
    """The entries of ``text`` (see the module docstring). Raises ValueError naming the
    variable and the entry that is wrong; an empty text allows nothing."""
    entries = [part.strip() for part in text.split(",") if part.strip()]
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"{VARIABLE} has {len(entries)} entries; at most {MAX_ENTRIES}")
    return tuple(_entry(entry) for entry in entries)


def egress_allow_text(allowances: tuple[EgressAllowance, ...]) -> str:
    """The canonical text of ``allowances`` (what the platform hands the server)."""
    return ",".join(str(allowance) for allowance in allowances)


def _entry(entry: str) -> EgressAllowance:
    where, _, port_text = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
    try:
        network = ipaddress.ip_network(where, strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{VARIABLE}: {entry[:80]!r} is not an IPv4 address or network ({exc}; "
            "write 10.2.0.5 or 10.8.0.0/16, each with an optional :port)"
        ) from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError(f"{VARIABLE}: {entry[:80]!r} is IPv6; the guard allows IPv4 only")
    if not port_text:
        return EgressAllowance(network)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{VARIABLE}: {entry[:80]!r} has a port that is not 1..65535")
    return EgressAllowance(network, int(port_text))
