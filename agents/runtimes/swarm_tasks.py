"""What an agent's service is doing, read from its task and that task's node.

A service of one replica with restart policy none has one task that matters, its
newest. Its state and its node's say whether the server runs (``RUNNING``), may still
come up (``STARTING``: scheduled, preparing or starting on a node that is up), or will
never serve again (``ENDED``: the task ended, was rejected or orphaned; ``NODE_DOWN``:
its node is down, so the swarm lost it with the node). Only the last two are stale.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

TERMINAL = frozenset({"complete", "failed", "shutdown", "rejected", "orphaned", "remove"})
NODE_LOST = frozenset({"down", "unknown", "disconnected"})


class ServiceState(enum.Enum):
    GONE = "gone"
    STARTING = "starting"
    RUNNING = "running"
    ENDED = "ended"
    NODE_DOWN = "node down"


@dataclass(frozen=True)
class ServiceView:
    state: ServiceState
    error: str = ""
    # ``address:port`` of the server's port published on its node (published mode).
    published: str = ""

    @property
    def value(self) -> str:
        return self.state.value

    @property
    def stale(self) -> bool:
        return self.state in {ServiceState.ENDED, ServiceState.NODE_DOWN}


def newest_task(client: Any, service_id: str) -> dict[str, Any] | None:
    tasks = client.api.tasks(filters={"service": service_id})
    return max(tasks, key=lambda t: (t.get("CreatedAt", ""), t["ID"]), default=None)


def _published(task: dict[str, Any], node: dict[str, Any]) -> str:
    ports = task.get("Status", {}).get("PortStatus", {}).get("Ports") or []
    address = node.get("Status", {}).get("Addr", "")
    if not ports or not address or not ports[0].get("PublishedPort"):
        return ""
    return f"{address}:{ports[0]['PublishedPort']}"


def service_state(client: Any, service: dict[str, Any] | None) -> ServiceView:
    """The view of ``service`` (an inspect result, or None for one that is gone)."""
    import docker.errors

    if service is None:
        return ServiceView(ServiceState.GONE)
    task = newest_task(client, service["ID"])
    if task is None:
        return ServiceView(ServiceState.STARTING)
    status = task.get("Status", {})
    state, error = status.get("State", ""), status.get("Err") or status.get("Message", "")
    if state in TERMINAL:
        return ServiceView(ServiceState.ENDED, error=error)
    if not task.get("NodeID"):
        return ServiceView(ServiceState.STARTING, error=error)
    try:
        node = client.api.inspect_node(task["NodeID"])
    except docker.errors.NotFound:
        return ServiceView(ServiceState.NODE_DOWN, error="its node left the swarm")
    if node.get("Status", {}).get("State") in NODE_LOST:
        return ServiceView(ServiceState.NODE_DOWN, error="its node is down")
    if state != "running":
        return ServiceView(ServiceState.STARTING, error=error)
    return ServiceView(ServiceState.RUNNING, published=_published(task, node))
