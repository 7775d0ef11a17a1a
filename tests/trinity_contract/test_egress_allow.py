"""TRINITY_AGENT_EGRESS_ALLOW, read the same by the platform (at startup) and by each
agent server (at boot): what it allows, its iptables lines, and every bad entry
refused with the variable and the entry named."""

from __future__ import annotations

import pytest

from trinity_contract.egress import MAX_ENTRIES, egress_allow_parse, egress_allow_text


def test_addresses_and_networks_with_or_without_a_port_read_back_canonical() -> None:
    allowed = egress_allow_parse(" 10.2.0.5:443, 10.8.0.0/16 ,,192.168.1.0/24:22 ")
    assert egress_allow_text(allowed) == "10.2.0.5/32:443,10.8.0.0/16,192.168.1.0/24:22"
    assert egress_allow_parse(egress_allow_text(allowed)) == allowed
    assert [allowance.rule("C") for allowance in allowed] == [
        "-A C -d 10.2.0.5/32 -p tcp -m tcp --dport 443 -j RETURN",
        "-A C -d 10.8.0.0/16 -j RETURN",
        "-A C -d 192.168.1.0/24 -p tcp -m tcp --dport 22 -j RETURN",
    ]
    assert egress_allow_parse("") == egress_allow_parse(" , ") == ()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("git.internal:22", "'git.internal:22' is not an IPv4 address or network"),
        ("10.8.0.1/16", "has host bits set"),
        ("10.0.0.0/33", "is not an IPv4 address or network"),
        ("fd00::/8", "'fd00::/8' is IPv6"),
        ("10.2.0.5:0", "has a port that is not 1..65535"),
        ("10.2.0.5:65536", "has a port that is not 1..65535"),
        ("10.2.0.5:ssh", "has a port that is not 1..65535"),
        ("10.2.0.5:-1", "has a port that is not 1..65535"),
        ("10.2.0.5 -j ACCEPT", "is not an IPv4 address or network"),
        (",".join(["10.0.0.1"] * (MAX_ENTRIES + 1)), f"at most {MAX_ENTRIES}"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_variable_and_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match="TRINITY_AGENT_EGRESS_ALLOW") as refused:
        egress_allow_parse(text)
    assert why in str(refused.value)
