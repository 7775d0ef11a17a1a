"""The swarm service an agent runs as, read from its create body (no engine: the
engine-backed tests are in tests/swarm)."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.swarm_spec import memory_bytes, secret_name, service_body, service_name
from trinity.crypto import Secret

CANARY_SECRET = "canary-agent-secret-" + "q" * 24
CANARY_TOKEN = "sk-ant-oat01-canary-" + "t" * 40


def body(**settings: object) -> dict[str, object]:
    spec = SpawnSpec(
        name="bot",
        runtime="claude-code",
        model="",
        secret=Secret(CANARY_SECRET),
        credentials={"CLAUDE_CODE_OAUTH_TOKEN": Secret(CANARY_TOKEN)},
        placement={"trinity.pool": "gpu-less"},
    )
    with override_settings(TRINITY_SWARM_CONSTRAINTS="node.role==worker", **settings):
        return service_body(spec, network="net-id", secret=("sec-id", "sec-name"), start_id="s1")


def test_the_body_carries_no_secret_only_the_file_it_is_in() -> None:
    made = body()
    shown = json.dumps(made)
    assert CANARY_SECRET not in shown and CANARY_TOKEN not in shown
    container = made["TaskTemplate"]["ContainerSpec"]  # type: ignore[index]
    assert container["Secrets"] == [
        {
            "File": {"Name": "trinity-agent-env", "UID": "0", "GID": "0", "Mode": 0o400},
            "SecretID": "sec-id",
            "SecretName": "sec-name",
        }
    ]
    assert "TRINITY_AGENT_ENV_FILE=/run/secrets/trinity-agent-env" in container["Env"]


def test_the_tmpfs_sizes_and_modes_are_the_docker_runtimes() -> None:
    mounts = body()["TaskTemplate"]["ContainerSpec"]["Mounts"]  # type: ignore[index]
    assert mounts == [
        {
            "Type": "tmpfs",
            "Target": "/tmp",
            "TmpfsOptions": {"SizeBytes": 256 << 20, "Mode": 0o1777},
        },
        {
            "Type": "tmpfs",
            "Target": "/home/agent/work",
            "TmpfsOptions": {"SizeBytes": 16 << 20, "Mode": 0o700},
        },
        {"Type": "volume", "Target": "/srv/trinity-agent"},
    ]


def test_placement_is_the_platforms_constraints_then_the_agents_labels() -> None:
    placement = body()["TaskTemplate"]["Placement"]  # type: ignore[index]
    assert placement == {"Constraints": ["node.role==worker", "node.labels.trinity.pool==gpu-less"]}


@pytest.mark.parametrize(
    ("mode", "ports"),
    [
        ("name", None),
        ("published", [{"Protocol": "tcp", "TargetPort": 8080, "PublishMode": "host"}]),
    ],
)
def test_a_published_endpoint_adds_the_port_on_the_tasks_node_only(
    mode: str, ports: list[dict[str, object]] | None
) -> None:
    endpoint = body(TRINITY_SWARM_ENDPOINT=mode)["EndpointSpec"]
    assert endpoint == {"Mode": "dnsrr", **({"Ports": ports} if ports else {})}


def test_a_long_key_still_makes_a_dns_label_and_keys_stay_apart() -> None:
    long_a, long_b = "a" * 90 + "x", "a" * 90 + "y"
    names = {service_name(long_a), service_name(long_b)}
    assert len(names) == 2 and all(len(n) <= 63 for n in names)
    assert len(secret_name(long_a, "0123456789ab")) <= 63
    assert service_name("bot") == "trinity-agent-bot"


@pytest.mark.parametrize(
    ("text", "size"), [("2g", 2 << 30), ("512m", 512 << 20), ("64k", 64 << 10), ("1000", 1000)]
)
def test_sizes_read_as_docker_reads_them(text: str, size: int) -> None:
    assert memory_bytes(text) == size
