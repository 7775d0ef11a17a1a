"""What the planner knows about one turn: one frozen value, filled lazily.

The executor (``execution/turn.py``) starts with ``Evidence(turn=TurnFacts(...))``,
asks the planner, and answers each ``Need`` by gathering that one piece and adding it
here (``dataclasses.replace``, ``learn`` for the facts of the current step). What
happened so far is ``history``: the events the executor saw while applying ``Send``
(an answered attempt, a plan at its concurrency cap, a key budget that refused the
reservation, an unreachable agent server). A fact that can change between steps (the
ranking, the key rung's state, the current assignment, the breaker) is kept in
``StepFacts`` with the step it was read at, so a new event makes it stale by itself.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from routing.eligibility import Admitted, Excluded
from routing.facts import AgentFacts, TurnFacts
from routing.plan_ahead.week_plan import Planned
from routing.rung import PLATFORM_KEY_LABEL, RungRef
from routing.walk import Stop, Why

if TYPE_CHECKING:
    from routing.headroom.alternatives import Selection
    from routing.headroom.reading import Reading


class Unknown(Enum):
    """Not gathered yet (a fact whose known value may itself be None)."""

    UNKNOWN = "unknown"


UNKNOWN = Unknown.UNKNOWN


class Closure(Protocol):
    """A consumed key budget (``subscriptions.key_spend.BudgetClosed``): why, and when
    it admits a key turn again."""

    @property
    def reason(self) -> str: ...

    @property
    def reopens_at(self) -> datetime: ...


@dataclass(frozen=True, slots=True)
class SettingsFacts:
    """The system settings and the switching verdict they give for this agent."""

    auto_switch: bool
    key_configured: bool
    # Why the agent may not leave its assignment at all (auto-switch off, pinned).
    switching_stop: Stop | None = None
    # The name of the agent's provider's key (its rung, its attempts, the explainer).
    key_name: str = PLATFORM_KEY_LABEL


class Previous(NamedTuple):
    """What served the session's previous turn."""

    kind: str
    subscription_id: int | None


class KeyState(NamedTuple):
    """The key rung: offered or not, and the consumed budget that closed it, if one did."""

    available: bool
    budget: Closure | None = None


class Current(NamedTuple):
    """The agent's assignment as it reads now (a concurrent turn may have moved it)."""

    subscription_id: int | None
    name: str


@dataclass(frozen=True, slots=True)
class Legacy:
    """An agent server that does not echo the override: rungs are applied by assignment."""

    on: bool = False
    # Hot reloads that needed a restart (at most one is allowed).
    restarts: int = 0
    # The agent's assignment as the executor last loaded it.
    assignment: int | None = None


class Outcome(NamedTuple):
    """What the agent server answered (the routing part of ``agents.client.TurnOutcome``)."""

    ok: bool
    error_code: str = ""
    detail: str = ""
    resets_at: datetime | None = None
    limiting_window: str = ""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One answered attempt: the rung sent, the rung it ran on (None: the agent's own
    credential, or a legacy server's), why it was chosen, whether it was the retry."""

    sent: RungRef | None
    ran_on: RungRef | None
    why: Why
    outcome: Outcome
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Busy:
    """The plan's concurrency cap was full: nothing was sent."""

    rung: RungRef
    why: Why
    retry: bool = False


@dataclass(frozen=True, slots=True)
class BudgetRefused:
    """A key budget refused the key rung's reservation: nothing was sent."""

    closure: Closure
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Unreachable:
    """The agent server could not be reached (nothing was answered)."""

    detail: str


Event = Attempt | Busy | BudgetRefused | Unreachable


@dataclass(frozen=True, slots=True)
class StepFacts:
    """Facts read for one step (``at`` = the number of events when they were read)."""

    at: int = 0
    selection: Selection | None = None
    key: KeyState | None = None
    current: Current | None = None
    # Whether a plan a forecast would route to runs out as well, by subscription id.
    forecast_out: Mapping[int, bool] = field(default_factory=dict)
    # The stored readings of the ids a reset is looked up for.
    readings: Mapping[int, Reading] | None = None
    # Where placement would move the agent (a subscription id), None to stay.
    placement: int | None | Unknown = UNKNOWN
    # The agent is due a placement look now (claimed), False if one was made lately.
    placement_due: bool | None = None
    # The breaker after the last attempt's failure was counted (True: open).
    breaker_after: bool | None = None
    # The breaker before the walk's next rung is sent (True: open).
    breaker_open: bool | None = None
    # The last attempt's refusal has been recorded against its credential.
    recorded: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything known about the turn now. Unknown pieces are None (or ``UNKNOWN``)."""

    turn: TurnFacts
    # The provider's breaker admitted the turn (None: not asked yet).
    admitted: bool | None = None
    # None: not made ready yet; "": ready; else why the agent could not be made ready.
    ready: str | None = None
    agent: AgentFacts | None = None
    settings: SettingsFacts | None = None
    # The assignment's verdict (``eligibility.admit``, role ``ASSIGNED``): its row, its
    # cached snapshot, refusal mark and forecast, judged for this turn. Readiness
    # already sets it when a rule forbids the assignment (its row alone says so).
    assigned: Admitted | Excluded | None = None
    previous: Previous | None | Unknown = UNKNOWN
    # The session's plan as a rung when it may stay on it, else None.
    affinity_plan: RungRef | None | Unknown = UNKNOWN
    # The agent's entry in the week plan, None when there is none (kept for the turn:
    # a served planned move explains itself with it).
    planned: Planned | None | Unknown = UNKNOWN
    # How many subscriptions the provider has (the walk's rung cap is this + 2).
    pool_size: int | None = None
    # Subscription rungs whose secret the executor holds (id -> name), and ids it asked
    # for that have none (deleted, or no token).
    rungs: Mapping[int, str] = field(default_factory=dict)
    missing: frozenset[int] = frozenset()
    legacy: Legacy = field(default_factory=Legacy)
    history: tuple[Event, ...] = ()
    # Optional stages whose reads failed (a database error): they are skipped.
    skipped: frozenset[str] = frozenset()
    # The latest ranking of the turn (a served switch explains itself with it).
    last_selection: Selection | None = None
    step: StepFacts = field(default_factory=StepFacts)

    @property
    def facts(self) -> StepFacts:
        """The facts of the current step (empty once a new event made them stale)."""
        at = len(self.history)
        return self.step if self.step.at == at else StepFacts(at=at)

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        return tuple(e for e in self.history if isinstance(e, Attempt))

    def after(self, event: Event) -> Evidence:
        """The evidence with ``event`` appended (the step's facts go stale)."""
        return replace(self, history=(*self.history, event))

    def learn(self, **facts: Any) -> Evidence:
        """The evidence with facts of the current step added."""
        step = replace(self.facts, **facts)
        if facts.get("selection") is not None:
            return replace(self, step=step, last_selection=facts["selection"])
        return replace(self, step=step)
