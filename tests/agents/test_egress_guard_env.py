"""Both container runtimes ask each agent's server for the egress guard, with the
capabilities it needs and the private destinations the operator allows through it
(read from their create bodies; no engine: the guard itself is pinned on the real
engine by tests/docker/test_agent_egress_guard_e2e.py)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import CAPABILITIES, GUARD_CAPABILITIES, DockerRuntime
from agents.runtimes.swarm_spec import service_body
from trinity.crypto import Secret

SPEC = SpawnSpec(name="bot", runtime="claude-code", model="", secret=Secret("s3cret-" + "x" * 30))


def _guard_variables(environment: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environment.items() if k.startswith("TRINITY_AGENT_EGRESS")}


@pytest.mark.parametrize("allowed", ["", "10.2.0.5/32:443,10.8.0.0/16"])
def test_docker_and_swarm_agents_start_guarded_with_the_operators_allowance(
    allowed: str,
) -> None:
    with override_settings(TRINITY_AGENT_EGRESS_ALLOW=allowed):
        container = DockerRuntime()._run_kwargs(SPEC, "net-id", "s1")
        service = service_body(SPEC, network="net-id", secret=("sec-id", "sec-name"), start_id="s1")
    task = service["TaskTemplate"]["ContainerSpec"]
    swarm_env = dict(item.split("=", 1) for item in task["Env"])

    expected = {"TRINITY_AGENT_EGRESS_GUARD": "1"}
    if allowed:
        expected["TRINITY_AGENT_EGRESS_ALLOW"] = allowed
    assert _guard_variables(container["environment"]) == expected
    assert _guard_variables(swarm_env) == expected
    both = sorted([*CAPABILITIES, *GUARD_CAPABILITIES])
    assert sorted(container["cap_add"]) == sorted(task["CapabilityAdd"]) == both
