"""The policies the fleet benchmark runs side by side, over one ``World`` each.

``ProjectPolicy`` is this project's: the dispatch loop of ``execution/services.py``
(``_Turn``) step for step, calling the real decision code (``classify_refusal``,
``pool.assigned_refusing``, ``rank_candidates``, ``walk_start`` / ``walk_next`` /
``pre_dispatch_pick``, ``probe_due``) over ``MemoryPool``, an in-memory stand-in for
what the loop reads from and writes to Postgres and the cache: refusal events and
marks, snapshots, assignments, notification dedup. The seam has the shapes the real
reads return (``TurnEvidence``, ``Candidate``, ``Selection``); the rules are never
re-implemented here.

The others are the simpler policies it is measured against: ``FixedPolicy`` (never
switch), ``RoundRobinPolicy`` and ``SwitchOnFailurePolicy`` (Trinity's original
behaviour: on a refusal move to the next plan in load-balance order, no ranking).
Every policy may bill the platform key as the last resort.
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
from execution.services import (
    EXHAUSTED_NOTICE_TTL,
    EXHAUSTED_STOPS,
    KEY_NOTICE_TTL,
    turn_timeout,
)
from subscriptions import pool
from subscriptions.classifier import QuotaEvidence, Refusal, classify_refusal
from subscriptions.headroom.alternatives import Selection
from subscriptions.headroom.candidates import Candidate
from subscriptions.headroom.probe_cadence import probe_due
from subscriptions.headroom.ranking import BALANCED, BANDED, rank_candidates
from subscriptions.headroom.reading import Reading, reading_replaces
from subscriptions.headroom.rebalance_plan import rebalance_plan
from subscriptions.headroom.refusal_windows import refusal_limit
from subscriptions.headroom.selection import fresh_for
from subscriptions.headroom.store import RefusalMark, TurnEvidence
from subscriptions.headroom.windows import family_window
from subscriptions.models import CredentialKind, FailureKind
from subscriptions.selectors import skip_window_start
from subscriptions.walk import (
    Pick,
    Stop,
    Walk,
    Why,
    key_refused_recently,
    pre_dispatch_pick,
    walk_gate,
    walk_next,
    walk_start,
)


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


# This project's policy and its in-memory seam


@dataclass(frozen=True)
class RefusalEvent:
    """A ``RateLimitEvent`` row: the refusal, against the credential that was sent."""

    occurred_at: datetime
    credential_kind: str
    subscription_id: int | None
    failure_kind: str | None
    resets_at: datetime | None
    limiting_window: str = ""


class MemoryPool:
    """What the dispatch loop reads and writes around the walk, in memory.

    Each method answers what its real counterpart answers, in the same shape:
    ``turn_evidence`` is ``store.turn_evidence_read``, ``candidates`` is
    ``selection.candidates_filtered`` (agent count and the latest refusal in the skip
    window, load-balance order), ``key_rung_available`` is ``pool.key_rung_available``
    over the key's events, ``record_refusal`` is ``record_rate_limit_event`` (the event
    and the refusal mark beside the snapshot), ``readings_record`` keeps what
    ``headroom_readings_record`` keeps, ``notify`` dedups as ``notification_send``.
    """

    def __init__(self, world: World, assignment: dict[str, int | None]) -> None:
        self.world = world
        self.assignment = assignment
        self.events: list[RefusalEvent] = []
        self.marks: dict[int, tuple[RefusalMark, datetime]] = {}  # mark, expires at
        self.snapshots: dict[int, Reading] = {}
        self.dedup: dict[str, datetime] = {}
        self.notifications = 0

    # Writes

    def record_refusal(
        self,
        *,
        credential_kind: str,
        subscription_id: int | None,
        failure_kind: str,
        resets_at: datetime | None,
        now: datetime,
        limiting_window: str = "",
        throttle: bool = False,
        family: str | None = None,
    ) -> None:
        if credential_kind != CredentialKind.SUBSCRIPTION:
            subscription_id = None
        if subscription_id is not None and failure_kind == FailureKind.RATE_LIMIT:
            pk = subscription_id
            limiting_window, resets_at = refusal_limit(
                self.snapshots.get(pk),
                resets_at=resets_at,
                claim=limiting_window,
                throttle=throttle,
                earlier=lambda: [
                    (e.limiting_window, e.occurred_at)
                    for e in reversed(self.events)
                    if e.subscription_id == pk
                ][:8],
                now=now,
                family=family,
            )
        self.events.append(
            RefusalEvent(
                now, credential_kind, subscription_id, failure_kind, resets_at, limiting_window
            )
        )
        if subscription_id is not None:
            ttl = timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)
            mark = RefusalMark(
                at=now,
                failure_kind=failure_kind,
                resets_at=resets_at,
                limiting_window=limiting_window,
            )
            self.marks[subscription_id] = (mark, now + ttl)

    def readings_record(self, readings: dict[int, Reading]) -> None:
        for pk, reading in readings.items():
            if reading_replaces(self.snapshots.get(pk), reading):
                self.snapshots[pk] = reading

    def notify(self, *, dedup_key: str = "", ttl: int = 0, now: datetime) -> bool:
        if dedup_key:
            expires = self.dedup.get(dedup_key)
            if expires is not None and now < expires:
                return False
            self.dedup[dedup_key] = now + timedelta(seconds=ttl)
        self.notifications += 1
        return True

    def commit(self, *, agent: str, expected: int, subscription_id: int, now: datetime) -> bool:
        """``assignment_commit``: compare-and-set, and ONE notification for the winner."""
        if self.assignment.get(agent) != expected:
            return False
        self.assignment[agent] = subscription_id
        self.notify(now=now)
        return True

    # Reads

    def _latest_in_window(self, subscription_id: int, now: datetime) -> RefusalEvent | None:
        start = skip_window_start(now)
        latest = None
        for event in self.events:
            if event.subscription_id == subscription_id and event.occurred_at > start:
                if latest is None or event.occurred_at >= latest.occurred_at:
                    latest = event
        return latest

    def turn_evidence(self, subscription_id: int, now: datetime) -> TurnEvidence:
        held = self.marks.get(subscription_id)
        mark = held[0] if held is not None and now < held[1] else None
        return TurnEvidence(
            reachable=True, reading=self.snapshots.get(subscription_id), refusal=mark
        )

    def last_failure_at(self, subscription_id: int, now: datetime) -> datetime | None:
        event = self._latest_in_window(subscription_id, now)
        return event.occurred_at if event is not None else None

    def candidates(self, *, exclude_ids: set[int], now: datetime) -> list[Candidate]:
        counts: dict[int, int] = {}
        for assigned in self.assignment.values():
            if assigned is not None:
                counts[assigned] = counts.get(assigned, 0) + 1
        rows = []
        for pk, subscription in self.world.subscriptions.items():
            if pk in exclude_ids:
                continue
            latest = self._latest_in_window(pk, now)
            rows.append(
                Candidate(
                    pk,
                    subscription.name,
                    counts.get(pk, 0),
                    latest.occurred_at if latest is not None else None,
                    latest.resets_at if latest is not None else None,
                    latest.limiting_window if latest is not None else None,
                )
            )
        rows.sort(key=lambda c: (c.agent_count, c.name))
        return rows

    def key_rung_available(self, now: datetime) -> bool:
        start = skip_window_start(now)
        latest = None
        for event in self.events:
            if event.credential_kind == CredentialKind.API_KEY and event.occurred_at > start:
                if latest is None or event.occurred_at >= latest.occurred_at:
                    latest = event
        if latest is None:
            return True
        return not key_refused_recently(
            failure_kind=latest.failure_kind, occurred_at=latest.occurred_at, now=now
        )


class ProjectPolicy(Policy):
    """This project's policy: ``execution/services.py``'s dispatch loop over the seam.

    The fleet runs with auto-switch and the key fallback on, no agent pinned, every
    agent a Claude runtime that may bill the key, and agent servers that echo the
    override (so no legacy path). Turns run one at a time, so the compare-and-set
    always wins and a concurrent switch never happens.
    """

    name = "this project"
    uses_readings = True
    # ``SystemSettings.routing_strategy``: how a walk and pre-dispatch rank (the
    # default, balanced).
    strategy = BALANCED
    # Whether the sweep also rebalances (``assignments_rebalance``; balanced only).
    rebalances = False

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.pool = MemoryPool(world, self.assignment)
        self.on_api_key_since: dict[str, datetime | None] = {
            a.name: None for a in trace.fleet.agents
        }
        self.interval = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
        self.limited_interval = timedelta(seconds=settings.TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS)
        self.budget = timedelta(seconds=turn_timeout(None))

    def sweep(self, now: datetime) -> None:
        """``headroom_sweep``: probe each due subscription and store what it read."""
        readings = {}
        for pk in self.world.subscriptions:
            if probe_due(
                self.pool.snapshots.get(pk),
                now=now,
                interval=self.interval,
                limited_interval=self.limited_interval,
                last_failure_at=self.pool.last_failure_at(pk, now),
            ):
                readings[pk] = self.world.reading(pk, now)
        self.pool.readings_record(readings)
        if self.rebalances:
            self._rebalance(now)

    def _rebalance(self, now: datetime) -> None:
        """``assignments_rebalance`` after the sweep: the hysteresis's moves, each a
        compare-and-set with one notification."""
        agents = [
            (a.name, current, family_window(a.model))
            for a in self.trace.fleet.agents
            if (current := self.assignment[a.name]) is not None
        ]
        candidates = self.pool.candidates(exclude_ids=set(), now=now)
        for move in rebalance_plan(
            agents, candidates, self.pool.snapshots, now=now, max_age=fresh_for()
        ):
            self.pool.commit(
                agent=str(move.agent),
                expected=move.from_id,
                subscription_id=move.to.candidate.subscription_id,
                now=now,
            )

    def run_turn(self, turn: Turn, now: datetime) -> TurnResult:
        return _ProjectTurn(self, turn, now).run()

    @property
    def sent(self) -> int:
        return self.pool.notifications


class _ProjectTurn:
    """One turn of ``_Turn.run``: pre-dispatch, attempt, classify, record, next rung."""

    def __init__(self, policy: ProjectPolicy, turn: Turn, now: datetime) -> None:
        self.policy = policy
        self.pool = policy.pool
        self.world = policy.world
        self.turn = turn
        self.now = now
        self.agent = turn.agent
        self.model = policy.trace.fleet.agent(turn.agent).model
        self.origin = policy.assignment[turn.agent]
        self.budget_end = now + policy.budget
        self.walk: Walk | None = None
        self.result = TurnResult(served_by=None)

    def baseline_rung(self) -> Rung | None:
        if self.origin is not None:
            return self.world.subscriptions[self.origin].rung
        return self.world.key_rung  # lifecycle.baseline_rung: the key where allowed

    def run(self) -> TurnResult:
        rung = self.baseline_rung()
        why = Why.ASSIGNED
        routed = self._pre_dispatch()
        if routed is not None:
            rung, why = routed
        while True:
            if rung is None:
                return self.result
            outcome = self.policy._try(self.result, rung, self.turn, self.now)
            if outcome.ok:
                self._served(rung, why)
                return self.result
            refusal = classify_refusal(
                error_code=outcome.error_code,
                detail=outcome.detail,
                evidence=QuotaEvidence(outcome.resets_at, outcome.limiting_window),
            )
            self._record_refusal(rung, refusal, outcome)
            step = self._next(rung, why, refusal, outcome)
            if not isinstance(step, Pick):
                self._refused(step)
                return self.result
            rung, why = self._materialize(step), step.why

    def _walk(self) -> Walk:
        if self.walk is None:
            self.walk = walk_start(
                origin=self.origin,
                autonomous=self.turn.autonomous,
                subscription_count=len(self.world.subscriptions),
                deadline=self.budget_end,
            )
        return self.walk

    def _selection(self) -> Selection:
        """``rank_alternatives``: the candidates minus the agent's plan and those tried,
        ranked by the stored readings with the real ranking."""
        walk = self._walk()
        excluded = set(walk.tried)
        current = self.policy.assignment[self.agent]
        if current is not None:
            excluded.add(current)
        candidates = self.pool.candidates(exclude_ids=excluded, now=self.now)
        ranking = rank_candidates(
            candidates,
            self.pool.snapshots,
            now=self.now,
            max_age=fresh_for(),
            family=family_window(self.model),
            strategy=self.policy.strategy,
        )
        return Selection(ranking.ranked, ranking.last_resort, ranking.dropped, now=self.now)

    def _pre_dispatch(self) -> tuple[Rung, Why] | None:
        if self.origin is None:
            return None
        evidence = self.pool.turn_evidence(self.origin, self.now)
        if not pool.assigned_refusing(evidence, now=self.now, family=family_window(self.model)):
            return None
        walk = self._walk()
        pick = pre_dispatch_pick(
            walk,
            selection=self._selection(),
            key_available=self.pool.key_rung_available(self.now),
            now=self.now,
        )
        if pick is None:
            return None
        rung = self._materialize(pick)
        return rung, Why.API_KEY if rung.kind is RungKind.API_KEY else Why.PRE_DISPATCH

    def _materialize(self, pick: Pick) -> Rung:
        if pick.kind is RungKind.API_KEY:
            return self.world.key_rung
        assert pick.subscription_id is not None
        return self.world.subscriptions[pick.subscription_id].rung

    def _record_refusal(self, ran_on: Rung, refusal: Refusal, outcome: TurnOutcome) -> None:
        if refusal.failure_kind is None:
            return
        self.pool.record_refusal(
            credential_kind=ran_on.kind.value,
            subscription_id=ran_on.subscription_id,
            failure_kind=refusal.failure_kind,
            resets_at=outcome.resets_at,
            limiting_window=outcome.limiting_window,
            family=family_window(self.model),
            throttle=refusal.throttle,
            now=self.now,
        )

    def _next(self, ran_on: Rung, why: Why, refusal: Refusal, outcome: TurnOutcome) -> Pick | Stop:
        stop = walk_gate(refusal=refusal, origin=self.origin)
        if stop is not None:
            return stop
        walk = self._walk()
        walk.record(
            kind=ran_on.kind,
            subscription_id=ran_on.subscription_id,
            name=ran_on.name,
            why=why,
            served=False,
            reason=refusal.reason,
            resets_at=outcome.resets_at,
        )
        current = self.policy.assignment[self.agent]
        current_name = self.world.subscriptions[current].name if current is not None else ""
        return walk_next(
            walk,
            refusal=refusal,
            selection=self._selection(),
            key_available=self.pool.key_rung_available(self.now),
            now=self.now,
            current_assignment=current,
            current_name=current_name,
        )

    def _served(self, ran_on: Rung, why: Why) -> None:
        """``_served``: commit a subscription that is not the origin, then the notices."""
        if (
            ran_on.kind is RungKind.SUBSCRIPTION
            and ran_on.subscription_id is not None
            and ran_on.key != (RungKind.SUBSCRIPTION, self.origin)
            and self.origin is not None
        ):
            self.pool.commit(
                agent=self.agent,
                expected=self.origin,
                subscription_id=ran_on.subscription_id,
                now=self.now,
            )
        since = self.policy.on_api_key_since
        if ran_on.kind is RungKind.API_KEY:
            if why is Why.API_KEY and since[self.agent] is None:
                since[self.agent] = self.now
                self.pool.notify(
                    dedup_key=f"api-key-route:{self.agent}", ttl=KEY_NOTICE_TTL, now=self.now
                )
            return
        if since[self.agent] is not None:
            since[self.agent] = None
            self.pool.notify(now=self.now)  # "Back on subscription"

    def _refused(self, stop: Stop) -> None:
        """``_refused``: an exhausted walk tells the operator (deduped per agent)."""
        walk = self.walk
        if walk is not None and walk.trail and stop in EXHAUSTED_STOPS:
            self.pool.notify(
                dedup_key=f"pool-exhausted:{self.agent}", ttl=EXHAUSTED_NOTICE_TTL, now=self.now
            )


class BandedProjectPolicy(ProjectPolicy):
    """This project's policy with ``routing_strategy`` banded (the earlier default)."""

    name = "this project (banded)"
    strategy = BANDED


class RebalancingProjectPolicy(ProjectPolicy):
    """The balanced order plus the sweep's proactive rebalancing
    (``TRINITY_REBALANCE``, off by default): what the moves add is the difference
    between this row and the project's."""

    name = "this project (balanced + rebalance)"
    rebalances = True


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
    return classify_refusal(error_code=outcome.error_code, detail=outcome.detail).walks


POLICIES: tuple[type[Policy], ...] = (
    ProjectPolicy,
    BandedProjectPolicy,
    RebalancingProjectPolicy,
    FixedPolicy,
    RoundRobinPolicy,
    SwitchOnFailurePolicy,
)
