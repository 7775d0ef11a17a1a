from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from trinity.crypto import Secret


@dataclass(frozen=True)
class SpawnSpec:
    """Everything an agent server needs at boot. ``credentials`` holds secret env values.

    ``name`` is the agent's runtime key (``Agent.runtime_key``), not its name: unique
    across owners and fixed for the agent's life, it names every resource the runtime
    keeps (home, socket, work area, container); the ``name=`` of every method below
    is the same key."""

    name: str
    runtime: str
    model: str
    secret: Secret
    env: dict[str, str] = field(default_factory=dict)
    credentials: dict[str, Secret] = field(default_factory=dict, repr=False)
    # Node labels the agent's server must run on (the swarm runtime's constraints;
    # the local and docker runtimes have one host and ignore them).
    placement: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The agent server's baseline environment, plaintext (goes to the process only)."""
        values = {
            **self.env,
            "TRINITY_AGENT_SECRET": self.secret.reveal(),
            "TRINITY_AGENT_RUNTIME": self.runtime,
        }
        if self.model:
            values["TRINITY_AGENT_MODEL"] = self.model
        values.update({name: value.reveal() for name, value in self.credentials.items()})
        return values


class StartConflict(RuntimeError):
    """Another start holds the agent's server name (a start race, or a server that is
    already there); this start created nothing and destroyed nothing."""


@dataclass(frozen=True)
class Spawned:
    endpoint: str
    handle: str  # a pid (local) or a container id (docker)


class AgentProcessRuntime(Protocol):
    name: str
    # Whether each agent server runs in a container of its own (one agent per
    # container: its own network, processes and filesystem), which contains the
    # agent's code even where the server has no sandbox (``Isolation.CONTAINER``).
    contained: bool

    def start(self, spec: SpawnSpec) -> Spawned:
        """Start an agent server and return once /health answers; raises RuntimeError."""
        ...

    def stop(self, *, name: str, handle: str) -> None:
        """Stop it; stopping something already gone is not an error."""
        ...

    def is_alive(self, *, name: str, handle: str) -> bool: ...

    def forget_credentials(self, *, name: str) -> None:
        """Delete the credential the agent's server persisted outside its memory (the
        plan token file); idempotent."""
        ...

    def discard(self, *, name: str) -> None:
        """Delete everything the agent left (token file first, then its home, log,
        containers and volumes); call it once the server is stopped. Idempotent."""
        ...
