"""A policy's run replayed as a schedule: each request straight to the rung that served it.

Every run is a feasible schedule. Sent again through a fresh ``World``, in time order,
each served request on the rung that served it is served again (what a window had
used when it came is what it had used in the run, since the same requests came
before it), and the key pays the same. So the replay is both a candidate for the
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

MTOK = 1e6


@dataclass(frozen=True)
class Replay:
    """What the replay paid on the key ($, priced per model family) and how many of
    its requests were refused (0 for a sound run)."""

    key_usd: float
    refusals: int


def schedule_replay(trace: Trace, served: Sequence[RequestRecord]) -> Replay:
    """Send ``served`` (a run's ``requests``, in time order) through a fresh ``World``,
    each on the rung that served it. A refused request is counted, not retried."""
    world = World(trace.fleet)
    key_usd, refusals = 0.0, 0
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
        outcome = world.attempt(rung, model=model, tokens=request.tokens, at=request.at)
        if not outcome.ok:
            refusals += 1
        elif on_key:
            key_usd += request.tokens * trace.fleet.key_price(model) / MTOK
    return Replay(key_usd, refusals)
