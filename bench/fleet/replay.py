"""A policy's run replayed as a schedule: each request straight to the rung that served it.

Every run is a feasible schedule. Sent again through a fresh ``World``, in time order,
each served request on the rung that served it is served again (what a window had
used when it came is what it had used in the run, since the same requests came
before it), each prompt prefix is warm or cold where it lands as it was in the run
(the same session's requests came before it, on the same rungs), and the key pays
the same. So the replay is both a candidate for the
best schedule known (``report.Comparison.achievable``) and an invariant check of the
engine: a refusal, or a key spend that differs from the run's, means the engine's
accounting and the world's disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.fleet.engine import RequestRecord
from bench.fleet.trace import Trace
from bench.fleet.world import World
from routing.rung import RungKind


@dataclass(frozen=True)
class Replay:
    """What the replay paid on the key ($, priced per model family) and how many of
    its requests were refused (0 for a sound run)."""

    key_usd: float
    refusals: int


def schedule_replay(trace: Trace, served: Sequence[RequestRecord]) -> Replay:
    """Send ``served`` (a run's ``requests``, in time order) through a fresh ``World``,
    each on the rung that served it, as its agent's session with its cached prefix.
    A refused request is counted, not retried. The key $ is the world's bill."""
    world = World(trace.fleet)
    refusals = 0
    for request in served:
        model = trace.model_of(trace.turns[request.turn])
        on_key = request.rung.kind is RungKind.API_KEY
        # The run's rung carries the run's world's secret; this world's rung is the same
        # plan under the same fleet index.
        rung = (
            world.key_rung
            if on_key
            else world.subscriptions[request.rung.subscription_id or 0].rung
        )
        outcome = world.attempt(
            rung,
            model=model,
            tokens=request.tokens,
            at=request.at,
            cached=request.cached,
            session=request.agent,
        )
        refusals += not outcome.ok
    return Replay(world.key_usd, refusals)
