"""The one small interface every runtime implements."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from agent_server.metering import Metered
from agent_server.runtimes.events import EventBounds
from agent_server.upstream import UpstreamSeen

Clock = Callable[[], datetime]

# A fixed namespace, so a control-plane session id maps to the same CLI session UUID
# across restarts of the agent server.
_SESSION_NAMESPACE = uuid.UUID("6b0f7c52-3c55-4d3e-9a0e-1f2f8a4c9d31")


def session_uuid(session_id: str) -> uuid.UUID:
    """The CLI session UUID for a control-plane session id (the CLI accepts only UUIDs)."""
    try:
        return uuid.UUID(session_id)
    except ValueError:
        return uuid.uuid5(_SESSION_NAMESPACE, session_id)


@dataclass(frozen=True)
class Turn:
    """One turn to run. `home` is the spawn's HOME; `cwd` is the agent's working dir."""

    execution_id: str
    message: str
    model: str | None
    timeout_seconds: float
    home: Path
    cwd: Path
    session_id: str | None = None
    # What the forwarder saw of the provider's answers on this turn's grant (its
    # latest refusal, rate-limit headers); None when the turn had no grant.
    upstream: UpstreamSeen | None = None
    # Where the spawn's events go while it runs (a streamed turn), else None.
    events: EventBounds | None = None


@dataclass(frozen=True)
class TurnOutcome:
    response: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    # The metered spend (the forwarder's sum, or the in-process runtime's own); None
    # when nothing metered the turn (the CLI ran without a grant).
    metered: Metered | None = None


class Runtime(Protocol):
    """Runs one turn in the environment it is given.

    `run` returns the answer or raises `agent_server.errors.TurnError`; it must not
    outlive `turn.timeout_seconds` by more than the time needed to kill its child.
    """

    name: str

    async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome: ...

    async def aclose(self) -> None:
        """Kill anything still running; called once at server shutdown."""
        ...
