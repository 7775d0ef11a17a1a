"""The facts a turn starts from: what its row and its agent say, read once, no I/O.

The planner (``routing/planner``) keeps them in its evidence, and the one judgement
of whether a plan may serve (``routing/eligibility.py::admit``) reads them beside the
plan's own facts. The executor fills them from the database row, the agent and the
settings (``execution/turn_state.py``); the fleet benchmark from its trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from routing.rung import RungRef

# The settings' defaults (``trinity/settings.py``): how long a reading is evidence,
# how long a refusal keeps a plan out, how long a turn is expected to run for a
# forecast. The executor passes the configured values.
FRESH_FOR = timedelta(seconds=3600)
SKIP_WINDOW = timedelta(seconds=2 * 3600)
FORECAST_FOR = timedelta(seconds=300)


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the turn's row and agent say before anything is read (no I/O)."""

    provider: str
    autonomous: bool
    created_at: datetime
    # The deadline minus the reaper's slack: the last instant the turn may use.
    budget_end: datetime
    session_id: str = ""
    # The turn's model-family window (its model, else the agent's), or None.
    family: str | None = None
    # The agent's wait policy is ``wait``, and for how long (parking).
    waits: bool = False
    max_wait_seconds: int = 0
    # How old a reading may be and still be evidence (``TRINITY_HEADROOM_FRESH_SECONDS``).
    fresh_for: timedelta = FRESH_FOR
    # How long a refusal keeps its plan out (``RATE_LIMIT_WINDOW_SECONDS``).
    skip_window: timedelta = SKIP_WINDOW
    # How long a turn is expected to run, for a forecast (``TRINITY_FORECAST_TURN_SECONDS``;
    # never past ``budget_end``).
    forecast_for: timedelta = FORECAST_FOR

    def expected_turn(self, now: datetime) -> timedelta:
        """How long the turn is expected to run from ``now``: ``forecast_for``, never
        past its own budget."""
        return max(timedelta(0), min(self.forecast_for, self.budget_end - now))


@dataclass(frozen=True, slots=True)
class AgentFacts:
    """The agent once it is ready: its assignment (the walk's origin), the rung it boots
    on, and its routing policy."""

    name: str
    origin: int | None
    baseline: RungRef | None
    routing_policy: str
    # Why the policy forbids a turn with no assignment at all ("" when it may run:
    # a subscription-only agent without a plan has no credential it may use). An
    # assignment's own verdict is ``admit``'s (``Evidence.assigned``).
    policy_refusal: str = ""
    # The agent is billing the platform key since an earlier turn (a notice is due
    # when a plan serves it again).
    on_api_key: bool = False
    # When its assignment last moved (its last switch), None if never: placement waits
    # a while after a move (``placement.DWELL``).
    moved_at: datetime | None = None
    # The plan that move left, while it is within that dwell (a walk goes back to it
    # only when nothing else ranks).
    moved_from: int | None = None
