"""The fleet benchmark's in-memory seam: what a turn reads from and writes to
Postgres and the cache, kept in memory in the shapes the real reads return
(``Candidate``, ``PlanFacts``, ``Selection``). Facts only: no rule is re-implemented
here, and nothing is judged. Every verdict on a plan is the product's
(``routing.eligibility``: ``admit`` and the selection it judges), given the facts
these methods read from memory instead of rows; ``tests/fleet/test_same_verdicts.py``
gives this memory and the product's gatherers the same facts and asserts the same
verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from bench.fleet.world import World
from routing import billing
from routing.eligibility import Admission, Candidate, PlanFacts
from routing.headroom.alternatives import Selection, select
from routing.headroom.candidates import candidate_of, in_load_balance_order
from routing.headroom.exhaustion_forecast import Forecast
from routing.headroom.placement import EVERY as PLACEMENT_EVERY
from routing.headroom.reading import Reading, reading_replaces
from routing.headroom.refusal_windows import refusal_limit
from routing.walk import key_refused_recently
from subscriptions.headroom.store import RefusalMark
from subscriptions.models import CredentialKind, FailureKind
from subscriptions.selectors import skip_window_start


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
    ``plan_facts`` is ``plan_facts.plan_facts_read`` (the plan's row, its snapshot,
    refusal mark and forecast), ``candidates`` is ``plan_facts.candidates_read``
    (every present plan, its agent count and its latest refusal in the skip window,
    load-balance order), ``selection`` is ``plan_facts.selection_read``,
    ``key_rung_available`` is ``key_rung_state.key_rung_available`` over the key's events,
    ``record_refusal`` is ``record_rate_limit_event`` (the event and the refusal mark
    beside the snapshot), ``readings_record`` keeps what ``headroom_readings_record``
    keeps, ``notify`` dedups as ``notification_send``.
    """

    def __init__(self, world: World, assignment: dict[str, int | None], *, strategy: str) -> None:
        self.world = world
        self.assignment = assignment
        self.strategy = strategy
        self.events: list[RefusalEvent] = []
        self.marks: dict[int, tuple[RefusalMark, datetime]] = {}  # mark, expires at
        self.snapshots: dict[int, Reading] = {}
        self.dedup: dict[str, datetime] = {}
        self.notifications = 0
        # Until when each agent's placement look is claimed (``placement_look.placement_due``).
        self.placement_claims: dict[str, datetime] = {}
        # When each agent's assignment last moved and what it left (``Agent.last_switch``).
        self.moved: dict[str, tuple[datetime, int]] = {}

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

    def placement_due(self, agent: str, now: datetime) -> bool:
        """``placement_look.placement_due``: claim the agent's look for ``placement.EVERY``."""
        held = self.placement_claims.get(agent)
        if held is not None and now < held:
            return False
        self.placement_claims[agent] = now + PLACEMENT_EVERY
        return True

    def commit(self, *, agent: str, expected: int, subscription_id: int, now: datetime) -> bool:
        """``assignment_commit``: compare-and-set, and ONE notification for the winner.

        Returns whether this call won; a loser (the agent moved since ``expected``)
        changes nothing and says nothing."""
        if self.assignment.get(agent) != expected:
            return False
        self.assignment[agent] = subscription_id
        self.moved[agent] = (now, expected)
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

    def plan_facts(
        self, subscription_id: int, now: datetime, *, forecast: Forecast | None = None
    ) -> PlanFacts:
        """``plan_facts_read``: the plan's row, its refusal mark while the mark lives,
        its snapshot, and ``forecast`` (the sampler's, kept by the policy)."""
        held = self.marks.get(subscription_id)
        mark = held[0] if held is not None and now < held[1] else None
        candidate = self._candidate(subscription_id, 0, mark, now)
        return PlanFacts(candidate, self.snapshots.get(subscription_id), forecast)

    def _candidate(
        self,
        pk: int,
        agent_count: int,
        refusal: RefusalMark | RefusalEvent | None,
        now: datetime,
    ) -> Candidate:
        """``pk``'s row facts at ``now``, with ``refusal`` (its mark, or its latest event)."""
        spec = self.world.fleet.subscriptions[pk - 1]
        entry = billing.classify(spec.provider, spec.plan_type)
        at = refusal.at if isinstance(refusal, RefusalMark) else None
        if isinstance(refusal, RefusalEvent):
            at = refusal.occurred_at
        return candidate_of(
            (
                pk,
                self.world.subscriptions[pk].name,
                agent_count,
                at,
                refusal.resets_at if refusal is not None else None,
                refusal.limiting_window if refusal is not None else None,
                refusal.failure_kind if refusal is not None else None,
                spec.paused_at(now),
                spec.plan_type,
                entry.billing_class,
                entry.overage,
            )
        )

    def last_failure_at(self, subscription_id: int, now: datetime) -> datetime | None:
        event = self._latest_in_window(subscription_id, now)
        return event.occurred_at if event is not None else None

    def candidates(self, now: datetime) -> list[Candidate]:
        """Every plan present at ``now``, as ``candidates_read`` gives them."""
        counts: dict[int, int] = {}
        for assigned in self.assignment.values():
            if assigned is not None:
                counts[assigned] = counts.get(assigned, 0) + 1
        rows = [
            self._candidate(pk, counts.get(pk, 0), self._latest_in_window(pk, now), now)
            for pk in self.world.present_ids(now)
        ]
        rows.sort(key=lambda c: c.name)
        return in_load_balance_order(rows)

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

    def selection(self, admission: Admission) -> Selection:
        """``selection_read``: every present plan judged by ``admission`` and the admitted
        ones ranked by the stored readings with the real ranking."""
        now = admission.now
        return select(self.candidates(now), self.snapshots, admission, strategy=self.strategy)
