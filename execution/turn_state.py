"""The executor's side of one running turn: the rows and secrets it holds, and what it
must give back (a lease, a breaker trial, a key reservation). The planner's side is
``state.evidence`` (``routing/planner``); this holds what the planner never sees.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.client import TurnOutcome
from agents.models import Agent, WaitPolicy
from execution.deadlines import budget_end
from execution.live.events import TurnEvents, turn_events_open
from execution.live.turn_events import turn_begun
from execution.models import Execution
from routing.headroom.windows import family_window
from routing.planner import Evidence, RungRef, TurnFacts
from routing.rung import Rung
from subscriptions.key_spend import Reservation
from subscriptions.plan_facts import with_settings
from trinity.models import SystemSettings
from trinity.selectors import system_settings_get


@dataclass
class TurnState:
    execution: Execution
    agent: Agent
    evidence: Evidence
    # The secrets of the rungs the planner may send on, by ``Rung.key``.
    rungs: dict[tuple[str, int | None], Rung] = field(default_factory=dict)
    # The attempts as the execution's row keeps them (structured, no secret).
    attempts: list[dict[str, Any]] = field(default_factory=list)
    system: SystemSettings | None = None
    # The provider's capped subscriptions (loaded once, when a cap is first asked).
    caps: dict[int, int] | None = None
    # The subscription this turn holds a concurrency lease on.
    lease_on: int | None = None
    # Whether this turn is its provider's half-open breaker trial.
    breaker_trial: bool = False
    # A key-budget reservation this turn holds and has not settled yet, and the
    # reservation itself (its remaining budget goes to the forwarder with the key).
    key_reserved: bool = False
    key_reservation: Reservation | None = None
    # A legacy walk committed the rung it last applied.
    legacy_committed: bool = False
    # For the metrics: when the loop started, how long it waited on agent servers, how
    # the first attempt was routed, whether the walk ran out.
    started: float = field(default_factory=time.perf_counter)
    waited: float = 0.0
    routed: str = ""
    exhausted: bool = False
    # The agent server's answer to the last attempt (what a served turn keeps).
    last_outcome: TurnOutcome | None = None
    # What the turn's stream is told (``execution/live/``).
    events: TurnEvents = field(default_factory=lambda: TurnEvents(execution_id=""))

    @property
    def holder(self) -> str:
        """The turn's id as a lease or trial holder."""
        return str(self.execution.pk)

    def settings(self) -> SystemSettings:
        if self.system is None:
            self.system = system_settings_get()
        return self.system

    def rung(self, ref: RungRef | None) -> Rung | None:
        """The secret-bearing rung for the planner's ``ref``."""
        return None if ref is None else self.rungs[ref.key]

    def keep(self, rung: Rung) -> RungRef:
        """Hold ``rung``'s secret; the planner's reference to it."""
        self.rungs[rung.key] = rung
        return RungRef(rung.kind, rung.subscription_id, rung.name)

    def reload_agent(self) -> Agent:
        self.agent = Agent.objects.select_related("subscription").get(pk=self.agent.pk)
        return self.agent

    @contextlib.contextmanager
    def agent_server_wait(self) -> Iterator[None]:
        sent = time.perf_counter()
        try:
            yield
        finally:
            self.waited += time.perf_counter() - sent


def turn_state_start(execution: Execution, agent: Agent) -> TurnState:
    """The state of a turn about to run: the facts its row and agent give (no query)."""
    facts = with_settings(
        TurnFacts(
            provider=agent.provider,
            autonomous=execution.autonomous,
            created_at=execution.created_at,
            budget_end=budget_end(execution),
            session_id=execution.session_id,
            family=family_window(execution.model or agent.model or ""),
            waits=agent.wait_policy == WaitPolicy.WAIT,
            max_wait_seconds=agent.max_wait_seconds,
        )
    )
    # A parked turn running again continues its stream; a new one starts it.
    again = execution.parked_until is not None
    events = turn_events_open(str(execution.pk), again=again)
    if not again:
        turn_begun(events, execution)
    return TurnState(execution=execution, agent=agent, evidence=Evidence(turn=facts), events=events)
