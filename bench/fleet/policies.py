"""The policies the fleet benchmark runs side by side, over one ``World`` each: the
``Policy`` seam and the simpler policies this project is measured against.

``FixedPolicy`` never switches, ``RoundRobinPolicy`` rotates, ``SwitchOnFailurePolicy``
is Trinity's original behaviour (on a refusal move to the next plan in load-balance
order, no ranking). Two outside baselines rank by cached readings:
``PiRouterPolicy`` (pi-subscription-router's balanced routing) and
``SoonestWeeklyResetPolicy``. This project's own policy is the turn planner itself
(``bench/fleet/project.py``). Every policy may bill the platform key as the last resort.

A policy runs a turn as a generator (``run_turn``): it yields each instant it wants
to resume at and returns its ``TurnResult``, so the engine interleaves every turn's
requests in time order. ``Policy._try`` sends the turn's remaining requests on one
rung, one at a time at their instants, and stops at the first refusal; the turn's
progress is kept, so the rest of the turn runs on whichever rung the policy tries
next: the CLI session resumed on another credential, not the turn started over.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from agents.client import TurnOutcome
from bench.fleet.trace import Trace, Turn
from bench.fleet.world import World
from routing.attempt_refusal import classify_attempt_refusal
from routing.headroom.reading import Reading
from routing.headroom.windows import family_window, turn_windows
from routing.rung import Rung, RungKind
from simulator.state import WINDOW_DURATIONS

# What a policy's turn is to the engine: it yields the instant to resume it at.
TurnRun = Generator[datetime, None, "TurnResult"]


@dataclass(frozen=True)
class Attempt:
    """One attempt of one request of a turn: the credential, what happened."""

    kind: RungKind
    subscription_id: int | None
    served: bool
    error_code: str = ""
    request: int = 0  # index into the turn's requests


@dataclass(frozen=True)
class Served:
    """A request served: which one, when, on which rung, whether some plan would have
    served it at that instant (before it ran), and whether its cached prefix was warm
    there (read) or written again (``World.last_warm``)."""

    request: int
    at: datetime
    rung: Rung
    plan_could_serve: bool
    warm: bool = True


@dataclass
class TurnResult:
    """How a policy ran one turn: the requests served (in order), every attempt.

    ``now`` is the turn's own clock, the instant of its latest request; ``served``
    holds a prefix of the turn's requests (a request is tried only after the one
    before it was served).
    """

    requests: int
    now: datetime
    served: list[Served] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)

    @classmethod
    def of(cls, turn: Turn, now: datetime) -> TurnResult:
        return cls(requests=len(turn.parts), now=now)

    @property
    def next(self) -> int:
        """The index of the first request not served yet."""
        return len(self.served)

    @property
    def complete(self) -> bool:
        return self.next == self.requests

    @property
    def served_by(self) -> Rung | None:
        """The rung that served the turn's last request; None if the turn failed."""
        return self.served[-1].rung if self.complete else None

    @property
    def refusals(self) -> int:
        return sum(1 for a in self.attempts if not a.served)

    def segments(self) -> Iterator[Rung]:
        """The rungs that served the turn, in order, each run of requests once."""
        previous: Rung | None = None
        for served in self.served:
            if served.rung != previous:
                yield served.rung
            previous = served.rung


class Policy(ABC):
    """One way of choosing credentials; ``notifications`` counts what it told the
    operator, ``parked`` the turns it parked (only the planner parks)."""

    name: str = ""
    uses_readings = False

    def __init__(self, trace: Trace, world: World) -> None:
        self.trace = trace
        self.world = world
        self.notifications = 0
        self.parked = 0
        # The assignment each agent starts with (subscription id or None): only a plan
        # registered at the start can be assigned (one added later starts empty).
        start = trace.fleet.start
        self.assignment: dict[str, int | None] = {
            a.name: pk
            if a.subscription and world.present(pk := world.by_name[a.subscription].id, start)
            else None
            for a in trace.fleet.agents
        }

    def sweep(self, now: datetime) -> None:  # noqa: B027 - a hook; most policies ignore it
        """The headroom sampler's beat; only a policy that reads headroom does anything."""

    def plan_removed(self, subscription_id: int, now: datetime) -> None:
        """The operator deleted a plan: its agents lose the assignment, as
        ``Agent.subscription``'s ``on_delete=SET_NULL`` does."""
        for agent, assigned in self.assignment.items():
            if assigned == subscription_id:
                self.assignment[agent] = None

    @property
    def sent(self) -> int:
        """Notifications sent so far."""
        return self.notifications

    @abstractmethod
    def run_turn(self, turn: Turn, now: datetime) -> TurnRun: ...

    def _try(
        self, result: TurnResult, rung: Rung, turn: Turn
    ) -> Generator[datetime, None, TurnOutcome]:
        """Send the turn's remaining requests on ``rung``, each at its instant (yielded
        first, so other turns interleave), until one is refused; returns the last
        outcome (served, or the refusal). A plan removed meanwhile is not sent to: its
        credential is gone, which the turn meets as an auth refusal. Nor is one an admin
        paused, when the turn would start there (a turn already on it finishes). Each
        request goes as the agent's session, with its cached prefix: the world decides
        whether that prefix is read or written again where it lands."""
        model = self.trace.model_of(turn)
        outcome: TurnOutcome | None = None
        first = True
        while not result.complete:
            index = result.next
            part = turn.parts[index]
            at = max(turn.at + timedelta(seconds=part.offset), result.now)
            yield at
            result.now = at
            pk = rung.subscription_id
            if pk is not None and (
                not self.world.present(pk, at) or (first and self.world.paused(pk, at))
            ):
                return self.world.withdrawn(rung, at)
            first = False
            # A plan that serves the request could serve it; only the key's requests
            # need to ask the world (a quota check of every plan).
            could = rung.kind is not RungKind.API_KEY or self.world.could_serve(model, at)
            outcome = self.world.attempt(
                rung,
                model=model,
                tokens=part.tokens,
                at=at,
                cached=part.cached,
                session=turn.agent,
            )
            result.attempts.append(
                Attempt(rung.kind, rung.subscription_id, outcome.ok, outcome.error_code, index)
            )
            if not outcome.ok:
                return outcome
            result.served.append(Served(index, at, rung, could, self.world.last_warm))
        assert outcome is not None, "a turn with nothing left to send"
        return outcome

    def _rung(self, subscription_id: int) -> Rung:
        return self.world.subscriptions[subscription_id].rung


# The simpler policies


class _KeyNotices:
    """A plain notifier: one notice per switch (a plan other than the one that last
    served the agent) and one each time an agent goes onto the key."""

    def __init__(self) -> None:
        self.on_key: dict[str, bool] = {}
        self.last_plan: dict[str, int] = {}
        self.count = 0

    def served(self, agent: str, result: TurnResult) -> None:
        for rung in result.segments():
            if rung.kind is RungKind.API_KEY:
                if not self.on_key.get(agent):
                    self.on_key[agent] = True
                    self.count += 1
                continue
            assert rung.subscription_id is not None
            self.on_key[agent] = False
            previous = self.last_plan.get(agent)
            if previous is not None and previous != rung.subscription_id:
                self.count += 1
            self.last_plan[agent] = rung.subscription_id


class NoticedPolicy(Policy):
    """A simple policy: the plain notifier, and the key when no plan served."""

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.notices = _KeyNotices()

    def _finish(self, turn: Turn, result: TurnResult) -> TurnRun:
        """The rest of the turn on the key (if any is left), then the notices."""
        if not result.complete:
            yield from self._try(result, self.world.key_rung, turn)
        return self._told(turn, result)

    def _told(self, turn: Turn, result: TurnResult) -> TurnResult:
        self.notices.served(turn.agent, result)
        self.notifications = self.notices.count
        return result


class FixedPolicy(NoticedPolicy):
    """Never switch: the agent's own plan, or the key when that plan refuses."""

    name = "fixed assignment"

    def run_turn(self, turn: Turn, now: datetime) -> TurnRun:
        result = TurnResult.of(turn, now)
        assigned = self.assignment[turn.agent]
        if assigned is not None:
            outcome = yield from self._try(result, self._rung(assigned), turn)
            if not outcome.ok and not walks(outcome):
                return self._told(turn, result)
        return (yield from self._finish(turn, result))


class RoundRobinPolicy(NoticedPolicy):
    """Each turn on the next plan in rotation; a refusal tries the following ones, then
    the key. It never remembers a refusal."""

    name = "round-robin"

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.cursor = 0

    def run_turn(self, turn: Turn, now: datetime) -> TurnRun:
        result = TurnResult.of(turn, now)
        order = self.world.present_ids(now)
        first = self.cursor % max(len(order), 1)
        self.cursor += 1
        for step in range(len(order)):
            pk = order[(first + step) % len(order)]
            if not self.world.present(pk, result.now):
                continue
            outcome = yield from self._try(result, self._rung(pk), turn)
            if outcome.ok:
                break
            if not walks(outcome):
                return self._told(turn, result)
        return (yield from self._finish(turn, result))


class SwitchOnFailurePolicy(NoticedPolicy):
    """Trinity's original behaviour: on a refusal, move the assignment to the next plan
    in load-balance order (fewest agents, then name) that did not refuse within the
    skip window, trying each in turn; no headroom, no ranking, no pre-dispatch check.
    When none serves, the key serves and the assignment stays."""

    name = "switch on failure"

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.failed_at: dict[int, datetime] = {}
        self.window = timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)

    def _order(self, exclude: set[int], now: datetime) -> list[int]:
        counts: dict[int, int] = {}
        for assigned in self.assignment.values():
            if assigned is not None:
                counts[assigned] = counts.get(assigned, 0) + 1
        fresh = [
            pk
            for pk in self.world.present_ids(now)
            if pk not in exclude
            and (pk not in self.failed_at or now - self.failed_at[pk] >= self.window)
        ]
        return sorted(fresh, key=lambda pk: (counts.get(pk, 0), self.world.subscriptions[pk].name))

    def run_turn(self, turn: Turn, now: datetime) -> TurnRun:
        result = TurnResult.of(turn, now)
        assigned = self.assignment[turn.agent]
        if assigned is None:
            return (yield from self._finish(turn, result))
        outcome = yield from self._try(result, self._rung(assigned), turn)
        if outcome.ok:
            return self._told(turn, result)
        if not walks(outcome):
            return self._told(turn, result)
        self.failed_at[assigned] = result.now
        for pk in self._order({assigned}, result.now):
            if not self.world.present(pk, result.now):
                continue
            before = result.next
            outcome = yield from self._try(result, self._rung(pk), turn)
            if result.next > before:
                self.assignment[turn.agent] = pk  # it served: the move is made
            if outcome.ok:
                break
            self.failed_at[pk] = result.now
        return (yield from self._finish(turn, result))


# The outside baselines: cached readings, blocks, no planner

READING_CACHE = timedelta(seconds=300)  # probe a plan at most every five minutes
BACKOFF_FIRST = timedelta(minutes=5)  # a block with no reported reset, doubling...
BACKOFF_CAP = timedelta(minutes=60)  # ...up to an hour
ALL_FAMILIES = "*"


class _Readings:
    """The five-minute usage cache: a plan is probed (``World.reading``) at most every
    ``READING_CACHE``, and otherwise answered from its last reading."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.cached: dict[int, Reading] = {}

    def get(self, subscription_id: int, now: datetime) -> Reading:
        held = self.cached.get(subscription_id)
        if held is None or now - held.fetched_at >= READING_CACHE:
            held = self.world.reading(subscription_id, now)
            self.cached[subscription_id] = held
        return held


class _Blocks:
    """Confirmed blocks per (plan, family): a refusal blocks until the reset it
    reported, else for a back-off of five minutes doubling to sixty. A refusal on a
    model family's weekly window blocks that family only (Sonnet's leaves Opus)."""

    def __init__(self) -> None:
        self.until: dict[tuple[int, str], datetime] = {}
        self.backoff: dict[tuple[int, str], timedelta] = {}

    def block(
        self, subscription_id: int, outcome: TurnOutcome, family: str | None, now: datetime
    ) -> None:
        scope = family if family and outcome.limiting_window == family else ALL_FAMILIES
        key = (subscription_id, scope)
        if outcome.resets_at is not None and outcome.resets_at > now:
            self.until[key] = outcome.resets_at
            return
        step = self.backoff.get(key)
        step = BACKOFF_FIRST if step is None else min(step * 2, BACKOFF_CAP)
        self.backoff[key] = step
        self.until[key] = now + step

    def served(self, subscription_id: int, family: str | None) -> None:
        """The plan answered: its back-off starts again from five minutes."""
        for scope in (ALL_FAMILIES, family or ALL_FAMILIES):
            self.backoff.pop((subscription_id, scope), None)

    def blocked(self, subscription_id: int, family: str | None, now: datetime) -> bool:
        scopes = (ALL_FAMILIES, family) if family else (ALL_FAMILIES,)
        return any(
            (until := self.until.get((subscription_id, scope))) is not None and now < until
            for scope in scopes
        )


def balanced_score(reading: Reading, family: str | None, now: datetime) -> float | None:
    """pi-subscription-router's score: over the turn's windows (5 h, 7 d, its family's
    weekly) the minimum of remaining / clamp(time left / duration, 0.05, 1); None when
    no window is measured. A window whose reset is past is ignored; one without a
    reset counts its whole duration as left."""
    scores = []
    for name in turn_windows(family):
        window = reading.windows.get(name)
        if window is None or window.utilization is None:
            continue
        if window.resets_at is not None and window.resets_at <= now:
            continue  # that window's quota no longer exists
        remaining = 1 - float(window.utilization) / 100
        left = 1.0
        if window.resets_at is not None:
            share = (window.resets_at - now).total_seconds() / WINDOW_DURATIONS[name]
            left = min(max(share, 0.05), 1.0)
        scores.append(remaining / left)
    return min(scores) if scores else None


def shows_exhausted(reading: Reading, family: str | None, now: datetime) -> bool:
    """Whether a cached reading already shows one of the turn's windows used up (with
    its reset still ahead)."""
    for name in turn_windows(family):
        window = reading.windows.get(name)
        if window is None or window.utilization is None or window.utilization < 100:
            continue
        if window.resets_at is None or window.resets_at > now:
            return True
    return False


class _CachedPolicy(NoticedPolicy):
    """A baseline that ranks plans from cached readings and skips blocked ones."""

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.readings = _Readings(world)
        self.blocks = _Blocks()

    def _eligible(self, family: str | None, now: datetime, tried: set[int]) -> list[int]:
        """Present plans not tried this turn, not blocked, not shown exhausted."""
        return [
            pk
            for pk in self.world.present_ids(now)
            if pk not in tried
            and not self.blocks.blocked(pk, family, now)
            and not shows_exhausted(self.readings.get(pk, now), family, now)
        ]

    @abstractmethod
    def _pick(self, turn: Turn, family: str | None, now: datetime, tried: set[int]) -> int | None:
        """The plan the rest of the turn goes to next (None: the key)."""

    def run_turn(self, turn: Turn, now: datetime) -> TurnRun:
        result = TurnResult.of(turn, now)
        family = family_window(self.trace.model_of(turn))
        tried: set[int] = set()
        while (pk := self._pick(turn, family, result.now, tried)) is not None:
            tried.add(pk)
            before = result.next
            outcome = yield from self._try(result, self._rung(pk), turn)
            if result.next > before:
                self._answered(turn.agent, pk, result.served[before].at)
                self.blocks.served(pk, family)
            if outcome.ok:
                break
            if not walks(outcome):
                return self._told(turn, result)
            self.blocks.block(pk, outcome, family, result.now)
        return (yield from self._finish(turn, result))

    @abstractmethod
    def _answered(self, agent: str, subscription_id: int, at: datetime) -> None:
        """A plan served part of an agent's turn from ``at`` on."""


class PiRouterPolicy(_CachedPolicy):
    """pi-subscription-router's balanced routing (docs/benchmarks.md): a new turn
    ranks the eligible plans by ``balanced_score`` (measured first, ties in fleet
    order) and keeps the incumbent (the plan that last served the agent) unless a
    challenger scores strictly more than 20 % better; the rest of a turn stays on the
    plan that last answered; a refusal blocks that plan and advances to the next
    ranked one; with every plan blocked, the key."""

    name = "pi-router balanced"
    uses_readings = True
    margin = 1.2
    # Scores this close count as equal (the router's boundary round-off).
    tie = 1e-9

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.incumbent: dict[str, int] = {}

    def _pick(self, turn: Turn, family: str | None, now: datetime, tried: set[int]) -> int | None:
        eligible = self._eligible(family, now, tried)
        scores = {pk: balanced_score(self.readings.get(pk, now), family, now) for pk in eligible}
        measured = [(pk, score) for pk, score in scores.items() if score is not None]
        measured.sort(key=lambda ranked: -ranked[1])  # stable: ties keep fleet order
        if not measured:
            # Nothing measured: the incumbent stays, else the first in fleet order.
            held = self.incumbent.get(turn.agent)
            return held if held in scores and not tried else next(iter(scores), None)
        best, top = measured[0]
        held = self.incumbent.get(turn.agent)
        if tried or held not in scores:
            return best  # a walk, or no eligible incumbent: the balanced pick
        mine = scores[held]
        if mine is None:
            return best  # a measured challenger promotes an unmeasured incumbent
        return best if top > mine * self.margin + self.tie else held

    def _answered(self, agent: str, subscription_id: int, at: datetime) -> None:
        self.incumbent[agent] = subscription_id


class SoonestWeeklyResetPolicy(_CachedPolicy):
    """Each turn on the eligible plan whose weekly (seven_day) window resets soonest by
    its cached reading (unknown resets last, ties in fleet order); an agent keeps its
    plan for a day unless the plan refuses; a refusal goes to the next soonest; then
    the key."""

    name = "soonest weekly reset"
    uses_readings = True
    sticky = timedelta(hours=24)

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.kept: dict[str, tuple[int, datetime]] = {}  # agent -> plan, since

    def _pick(self, turn: Turn, family: str | None, now: datetime, tried: set[int]) -> int | None:
        eligible = self._eligible(family, now, tried)
        kept = self.kept.get(turn.agent)
        if not tried and kept is not None and kept[0] in eligible and now - kept[1] < self.sticky:
            return kept[0]
        if not eligible:
            return None
        return min(eligible, key=lambda pk: self._weekly_reset(pk, now))

    def _weekly_reset(self, subscription_id: int, now: datetime) -> float:
        window = self.readings.get(subscription_id, now).windows.get("seven_day")
        if window is None or window.resets_at is None:
            return float("inf")
        return window.resets_at.timestamp()

    def _answered(self, agent: str, subscription_id: int, at: datetime) -> None:
        kept = self.kept.get(agent)
        if kept is None or kept[0] != subscription_id or at - kept[1] >= self.sticky:
            self.kept[agent] = (subscription_id, at)


def walks(outcome: TurnOutcome) -> bool:
    """Whether a refusal moves the turn to another credential (the product's rule)."""
    return classify_attempt_refusal(error_code=outcome.error_code, detail=outcome.detail).walks
