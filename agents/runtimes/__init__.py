"""Where agent servers run: local processes (embedded default), docker containers, or
swarm services across a swarm's nodes."""

from __future__ import annotations

from django.conf import settings

from agents.runtimes.base import AgentProcessRuntime, Spawned, SpawnSpec


def get_runtime() -> AgentProcessRuntime:
    if settings.TRINITY_AGENT_BACKEND == "swarm":
        from agents.runtimes.swarm import SwarmRuntime

        return SwarmRuntime()
    if settings.TRINITY_AGENT_BACKEND == "docker":
        from agents.runtimes.docker import DockerRuntime

        return DockerRuntime()
    from agents.runtimes.local import LocalProcessRuntime

    return LocalProcessRuntime()


__all__ = ["AgentProcessRuntime", "SpawnSpec", "Spawned", "get_runtime"]
