"""The policies the fleet benchmark runs side by side, over one ``World`` each: the
``Policy`` seam and the simpler policies this project is measured against.

``FixedPolicy`` never switches, ``RoundRobinPolicy`` rotates, ``SwitchOnFailurePolicy``
is Trinity's original behaviour (on a refusal move to the next plan in load-balance
order, no ranking). This project's own policy is the turn planner itself
(``bench/fleet/project.py``). Every policy may bill the platform key as the last resort.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from agents.client import TurnOutcome
from agents.rung import Rung, RungKind
from bench.fleet.trace import Trace, Turn
from bench.fleet.world import World
from subscriptions.classifier import classify_attempt_refusal


@dataclass(frozen=True)
class Attempt:
    """One attempt of a turn: the credential it ran on and what happened."""

    kind: RungKind
    subscription_id: int | None
    served: bool
    error_code: str = ""


@dataclass
class TurnResult:
    """How a policy ran one turn. ``served_by`` is the rung that served, None if failed."""

    served_by: Rung | None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def refusals(self) -> int:
        return sum(1 for a in self.attempts if not a.served)


class Policy(ABC):
    """One way of choosing credentials; ``notifications`` counts what it told the operator."""

    name: str = ""
    uses_readings = False

    def __init__(self, trace: Trace, world: World) -> None:
        self.trace = trace
        self.world = world
        self.notifications = 0
        # The assignment each agent starts with (subscription id or None).
        self.assignment: dict[str, int | None] = {
            a.name: world.by_name[a.subscription].id if a.subscription else None
            for a in trace.fleet.agents
        }

    def sweep(self, now: datetime) -> None:  # noqa: B027 - a hook; most policies ignore it
        """The headroom sampler's beat; only a policy that reads headroom does anything."""

    @property
    def sent(self) -> int:
        """Notifications sent so far."""
        return self.notifications

    @abstractmethod
    def run_turn(self, turn: Turn, now: datetime) -> TurnResult: ...

    def _try(self, result: TurnResult, rung: Rung, turn: Turn, now: datetime) -> TurnOutcome:
        outcome = self.world.attempt(
            rung, model=self.trace.model_of(turn), tokens=turn.tokens, at=now
        )
        result.attempts.append(
            Attempt(rung.kind, rung.subscription_id, outcome.ok, outcome.error_code)
        )
        if outcome.ok:
            result.served_by = rung
        return outcome


# The simpler policies


class _KeyNotices:
    """A plain notifier: one notice per switch and one each time an agent goes onto the key."""

    def __init__(self) -> None:
        self.on_key: dict[str, bool] = {}
        self.count = 0

    def served(self, agent: str, rung: Rung | None, switched: bool) -> None:
        if rung is None:
            return
        if rung.kind is RungKind.API_KEY:
            if not self.on_key.get(agent):
                self.on_key[agent] = True
                self.count += 1
            return
        self.on_key[agent] = False
        if switched:
            self.count += 1


class FixedPolicy(Policy):
    """Never switch: the agent's own plan, or the key when that plan refuses."""

    name = "fixed assignment"

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.notices = _KeyNotices()

    def run_turn(self, turn: Turn, now: datetime) -> TurnResult:
        result = TurnResult(served_by=None)
        assigned = self.assignment[turn.agent]
        if assigned is not None:
            outcome = self._try(result, self.world.subscriptions[assigned].rung, turn, now)
            if not outcome.ok and not _walks(outcome):
                return result
        if result.served_by is None:
            self._try(result, self.world.key_rung, turn, now)
        self.notices.served(turn.agent, result.served_by, switched=False)
        self.notifications = self.notices.count
        return result


class RoundRobinPolicy(Policy):
    """Each turn on the next plan in rotation; a refusal tries the following ones, then
    the key. It never remembers a refusal."""

    name = "round-robin"

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.cursor = 0
        self.order = sorted(world.subscriptions)
        self.notices = _KeyNotices()
        self.last_plan: dict[str, int | None] = {}

    def run_turn(self, turn: Turn, now: datetime) -> TurnResult:
        result = TurnResult(served_by=None)
        count = len(self.order)
        first = self.cursor
        self.cursor = (self.cursor + 1) % max(count, 1)
        for step in range(count):
            pk = self.order[(first + step) % count]
            outcome = self._try(result, self.world.subscriptions[pk].rung, turn, now)
            if outcome.ok:
                break
            if not _walks(outcome):
                return result
        if result.served_by is None:
            self._try(result, self.world.key_rung, turn, now)
        served = result.served_by
        switched = False
        if served is not None and served.kind is RungKind.SUBSCRIPTION:
            previous = self.last_plan.get(turn.agent)
            switched = previous is not None and previous != served.subscription_id
            self.last_plan[turn.agent] = served.subscription_id
        self.notices.served(turn.agent, served, switched)
        self.notifications = self.notices.count
        return result


class SwitchOnFailurePolicy(Policy):
    """Trinity's original behaviour: on a refusal, move the assignment to the next plan
    in load-balance order (fewest agents, then name) that did not refuse within the
    skip window, trying each in turn; no headroom, no ranking, no pre-dispatch check.
    When none serves, the key serves and the assignment stays."""

    name = "switch on failure"

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.failed_at: dict[int, datetime] = {}
        self.notices = _KeyNotices()
        self.window = timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)

    def _order(self, exclude: set[int], now: datetime) -> list[int]:
        counts: dict[int, int] = {}
        for assigned in self.assignment.values():
            if assigned is not None:
                counts[assigned] = counts.get(assigned, 0) + 1
        fresh = [
            pk
            for pk in self.world.subscriptions
            if pk not in exclude
            and (pk not in self.failed_at or now - self.failed_at[pk] >= self.window)
        ]
        return sorted(fresh, key=lambda pk: (counts.get(pk, 0), self.world.subscriptions[pk].name))

    def run_turn(self, turn: Turn, now: datetime) -> TurnResult:
        result = TurnResult(served_by=None)
        assigned = self.assignment[turn.agent]
        switched = False
        if assigned is not None:
            outcome = self._try(result, self.world.subscriptions[assigned].rung, turn, now)
            if not outcome.ok:
                if not _walks(outcome):
                    return result
                self.failed_at[assigned] = now
                for pk in self._order({assigned}, now):
                    if self._try(result, self.world.subscriptions[pk].rung, turn, now).ok:
                        self.assignment[turn.agent] = pk
                        switched = True
                        break
                    self.failed_at[pk] = now
        if result.served_by is None:
            self._try(result, self.world.key_rung, turn, now)
        self.notices.served(turn.agent, result.served_by, switched)
        self.notifications = self.notices.count
        return result


def _walks(outcome: TurnOutcome) -> bool:
    return classify_attempt_refusal(error_code=outcome.error_code, detail=outcome.detail).walks
