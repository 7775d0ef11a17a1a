"""What the planner answers: the next action of a turn. Each is a frozen value; the
executor applies it and, unless it finishes the turn, asks again."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from routing.attempt_refusal import AttemptRefusal
from routing.planner.evidence import Closure
from routing.rung import RungRef
from routing.walk import Why


class Ask(StrEnum):
    """A piece of evidence the planner needs before it can answer (``Need.ask``)."""

    # The provider's breaker: may the turn be sent (claims a half-open trial).
    BREAKER = "breaker"
    # Start the agent if it is down, take a forbidden boot key away; then AgentFacts,
    # and the assignment's verdict when a rule forbids it (from its row, no cache read).
    READY = "ready"
    # The system settings and the agent's switching verdict (SettingsFacts).
    SETTINGS = "settings"
    # The assignment's verdict (``admit`` on its row, cached snapshot, refusal mark and
    # forecast).
    ASSIGNED = "assigned"
    # What served the session's previous turn (Previous, or None).
    AFFINITY = "affinity"
    # Whether the session's plan (``ids[0]``) may serve this turn (its rung, or None).
    AFFINITY_PLAN = "affinity_plan"
    # How many subscriptions the provider has (the walk's rung cap).
    POOL_SIZE = "pool_size"
    # The ranking of the provider's plans, leaving out ``ids`` and the plans at their cap.
    SELECTION = "selection"
    # The key rung's state (KeyState).
    KEY = "key"
    # The agent's assignment as it reads now (Current).
    CURRENT = "current"
    # The secrets of the subscriptions ``ids`` (the executor may fetch a few more).
    RUNGS = "rungs"
    # Whether the plan ``ids[0]`` is forecast to run out before the turn would end.
    FORECAST = "forecast"
    # The stored readings of ``ids`` (for the earliest known reset).
    READINGS = "readings"
    # Of the measured alternatives ``ids`` (in rank order), the one placement moves the
    # agent to (``routing.headroom.placement``), or None.
    PLACEMENT = "placement"
    # Whether the agent is due a look (claims it: at most once per ``placement.EVERY``).
    PLACEMENT_DUE = "placement_due"
    # The agent's entry in the week plan (``routing.plan_ahead.week_plan.Planned``), or
    # None when there is none: one cache read.
    PLANNED = "planned"
    # Count the last attempt's failure against its provider if it is a provider-level
    # one; then whether the breaker is open.
    BREAKER_FAILURE = "breaker_failure"
    # Whether the provider's breaker is open now.
    BREAKER_OPEN = "breaker_open"


# Stages whose reads may fail without failing the turn (an optimisation: skipped).
AFFINITY_STAGE = "affinity"
PRE_DISPATCH_STAGE = "pre_dispatch"
PLACEMENT_STAGE = "placement"
PLANNED_STAGE = "planned"


@dataclass(frozen=True, slots=True)
class Need:
    """Gather ``ask`` (for ``ids``) and ask again. ``stage`` names an optional stage: a
    database error while gathering skips it (``Evidence.skipped``) instead of failing."""

    ask: Ask
    ids: tuple[int, ...] = ()
    stage: str = ""


# How the first attempt was routed, for the metrics (``trinity.metrics.PLAN``/``KEY``).
ROUTED_PLAN = "plan"
ROUTED_KEY = "key"


@dataclass(frozen=True, slots=True)
class Send:
    """Send the turn on ``rung`` (None: without an override, on what the agent boots
    with). ``retry``: the single re-send after a provider error. ``reassign``: a legacy
    agent server, so the rung is committed as the assignment and hot-reloaded first.
    ``routed``: set when this first attempt was routed away from the assignment."""

    rung: RungRef | None
    why: Why
    retry: bool = False
    reassign: bool = False
    routed: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """Record the last attempt's refusal against the credential it ran on."""

    refusal: AttemptRefusal


@dataclass(frozen=True, slots=True)
class Switch:
    """A served turn that left its assignment: the reason it records, and whether to
    commit the served plan as the assignment (the compare-and-set)."""

    reason: dict[str, Any]
    commit: bool


class Notice(StrEnum):
    """The one notice a served turn may owe the operator."""

    API_KEY_ROUTE = "api_key_route"
    SUBSCRIPTION_RETURN = "subscription_return"
    # A throttle sent the turn elsewhere; the assignment stays (no switch committed).
    THROTTLE_DETOUR = "throttle_detour"


@dataclass(frozen=True, slots=True)
class Finish:
    """The turn was served by ``served_by`` (None: the agent's own credential)."""

    served_by: RungRef | None
    why: Why
    switch: Switch | None = None
    notice: Notice | None = None
    # Served on its own plan with no notice due: one row write, no transaction.
    plain: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended:
    """What a parked or failed turn tells: the stop, the detail, and the notices."""

    detail: str
    walk_stop: str = ""
    # Every candidate refused (the metrics' "exhausted").
    exhausted: bool = False
    # Tell the operator the pool is exhausted (deduplicated per agent).
    notify_exhausted: bool = False
    # The consumed key budget to tell the operator about.
    key_closed: Closure | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Park(Ended):
    """Park the autonomous turn until ``until`` (the earliest known reset)."""

    until: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Fail(Ended):
    """Fail the turn with ``error_code``; ``resets_at``: the earliest known reset."""

    error_code: str
    resets_at: datetime | None = None


Action = Need | Send | Record | Finish | Park | Fail
