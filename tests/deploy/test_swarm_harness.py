"""deploy/swarm.py leaves nothing behind: after a whole swarm with a node killed, and
after an ``up`` that failed half-way. It runs as swarm 9 (TRINITY_SWARM_ID), apart
from the session's swarm of tests/swarm."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.execution.support import wait_until
from tests.swarm.conftest import harness as swarm_harness

REPO = Path(__file__).resolve().parents[2]
PREFIX = "trsw9"
STATE = REPO / ".docker-swarm" / "swarm9"

pytestmark = pytest.mark.e2e


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return swarm_harness(*args, swarm_id="9")


def run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout  # noqa: S603


def statuses(manager: str) -> list[str]:
    """The swarm's nodes' states as its manager sees them, sorted."""
    return sorted(run("docker", "-H", manager, "node", "ls", "--format", "{{.Status}}").split())


def left_over() -> dict[str, Any]:
    """Whatever of swarm 9 the machine still holds."""
    mounts = Path("/proc/self/mounts").read_text()
    cgroups = [p for p in Path("/sys/fs/cgroup").glob(f"*/trinity-swarm-{PREFIX}-*")]
    return {
        "namespaces": [n for n in run("ip", "netns", "list").split() if n.startswith(PREFIX)],
        "links": [line for line in run("ip", "-o", "link").splitlines() if PREFIX in line],
        "forward_rules": [r for r in run("iptables", "-S", "FORWARD").splitlines() if PREFIX in r],
        "state": STATE.exists(),
        "mounts": str(STATE) in mounts,
        "cgroups": cgroups,
        "engines": [line for line in run("ps", "-eo", "args").splitlines() if str(STATE) in line],
    }


NOTHING = {
    "namespaces": [],
    "links": [],
    "forward_rules": [],
    "state": False,
    "mounts": False,
    "cgroups": [],
    "engines": [],
}


@pytest.fixture(autouse=True)
def _root(engine: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("a swarm of namespaced engines needs root")


def test_a_swarm_with_a_killed_node_is_removed_whole() -> None:
    try:
        made = harness("up", "2")
        assert made.returncode == 0, made.stderr
        nodes = json.loads(made.stdout)["nodes"]
        assert statuses(nodes[0]["socket"]) == ["Ready", "Ready"]

        assert harness("kill", nodes[1]["name"]).returncode == 0
        assert run("ip", "netns", "pids", nodes[1]["name"]).split() == []
        wait_until(
            lambda: statuses(nodes[0]["socket"]) == ["Down", "Ready"], seconds=60, what="down"
        )

        assert harness("revive", nodes[1]["name"]).returncode == 0
        wait_until(
            lambda: statuses(nodes[0]["socket"]) == ["Ready", "Ready"], seconds=60, what="back"
        )
    finally:
        assert harness("down").returncode == 0
    assert left_over() == NOTHING


def test_down_after_an_up_that_failed_half_way_removes_the_half() -> None:
    # The second node's namespace is taken: up fails after making the bridge, the
    # host's rule and the first node.
    run("ip", "netns", "add", f"{PREFIX}-n2")
    try:
        made = harness("up", "2")
        assert made.returncode == 1 and f"{PREFIX}-n2" in made.stderr
    finally:
        assert harness("down").returncode == 0
    assert left_over() == NOTHING
