"""The credential walk's decision core: given what happened, which rung comes next.

Pure: no Django, no I/O, ``now`` is an argument. The dispatch loop (``execution/``)
owns the I/O: it sends each rung, records each refusal, ranks the alternatives
(``rank_alternatives``) and says whether the platform-key rung is available; this
module only decides. The fleet benchmark calls it directly.

The rules, each a test in ``tests/subscriptions/test_walk.py``:

- Only a quota or credential refusal walks; an agent without a subscription never
  walks; with auto-switch off (or a pinned agent) nothing walks.
- Rung order: untried subscriptions that are viable or readmitted on evidence, in
  ranked order; then the skip-listed ones (last resort; an autonomous turn only takes
  one whose last failure is at least 30 minutes old); then the platform API key.
- A refusal after a concurrent turn moved the assignment re-runs once on the new
  baseline (that re-run can never commit a second switch).
- Bounds: at most ``len(subscriptions) + 2`` rungs, computed once; a pick already
  tried means exhausted; no re-issue with less than the floor of time left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from routing.attempt_refusal import AttemptRefusal
from routing.headroom.alternatives import Selection
from routing.rung import PLATFORM_KEY_LABEL, RungKind

# A schedule firing every few minutes must not re-probe a refused plan on every run.
LAST_RESORT_MIN_AGE_AUTONOMOUS = timedelta(minutes=30)
# A re-issue needs time to be worth making: a turn with seconds left would time out,
# billed and blamed on the rung. 30 s for the turn plus slack for the round trip.
REISSUE_FLOOR = timedelta(seconds=30)
REISSUE_SLACK = timedelta(seconds=5)
# A 429 on the key is a burst, not "no credit": closing the last rung of every agent
# for two hours on one spike would fail turns the key could serve minutes later.
KEY_RATE_LIMIT_PAUSE = timedelta(minutes=5)
# Beyond every subscription once: the key rung and one concurrent-switch re-run.
RUNG_CAP_EXTRA = 2


class Why(StrEnum):
    """Why a rung was tried."""

    ASSIGNED = "assigned"
    PRE_DISPATCH = "pre_dispatch"
    RANKED = "ranked"
    READMITTED = "readmitted"
    LAST_RESORT = "last_resort"
    API_KEY = "api_key"
    CONCURRENT_SWITCH = "concurrent_switch"
    # The same rung once more after a provider 5xx (the dispatch loop's single retry).
    RETRY = "retry"
    # A chat turn on the plan that served its session's previous turn (a warm prompt
    # cache); it commits no switch.
    AFFINITY = "affinity"
    # The assignment is a plan the agent's routing policy does not allow (a
    # subscription-only agent on a plan that bills overage): routed to one it does.
    POLICY = "policy"
    # The assigned plan is serving its concurrency cap: this turn runs elsewhere, and
    # commits no switch (the plan is busy, not failing).
    AT_CAPACITY = "at_capacity"
    # Nothing refuses, but another plan's weekly headroom expires clearly sooner, or it
    # is clearly better balanced (``routing.headroom.placement``): the turn
    # starts there and commits it.
    PLACEMENT = "placement"
    # The week plan (``routing.plan_ahead``) puts the agent on this plan: the turn
    # starts there and commits it.
    PLANNED = "planned"
    # The week plan has the key take this agent's turns for now (its family's turns
    # are the cheapest to bill while the week's demand is over what the plans serve);
    # it commits no switch.
    SPILL = "spill"


class Stop(StrEnum):
    """Why the walk ends without another rung."""

    NOT_A_CREDENTIAL_REFUSAL = "not_a_credential_refusal"
    NO_SUBSCRIPTION = "no_subscription"
    AUTO_SWITCH_OFF = "auto_switch_off"
    PINNED = "pinned"
    EXHAUSTED = "exhausted"
    ALREADY_TRIED = "already_tried"
    RUNG_CAP = "rung_cap"
    BUDGET = "budget"
    # The routing policy leaves no credential this turn may use (subscription-only).
    POLICY = "policy"
    # The key rung's spend budget (agent or fleet, day or month) is consumed.
    KEY_BUDGET = "key_budget"
    # The provider's circuit breaker is open: the turn fails fast instead of dispatching
    # or walking the pool into an outage (subscriptions/breaker.py).
    PROVIDER_OUTAGE = "provider_outage"
    # Every credential the turn could use is serving its concurrency cap.
    AT_CAPACITY = "at_capacity"


class Pick(NamedTuple):
    """The next rung to try, without its secret (the dispatch loop attaches it)."""

    kind: RungKind
    subscription_id: int | None
    name: str
    why: Why


@dataclass(frozen=True, slots=True)
class Trial:
    """One attempt of a walk, as the trail keeps it (never a secret)."""

    kind: RungKind
    subscription_id: int | None
    name: str
    why: Why
    served: bool
    reason: str = ""
    resets_at: datetime | None = None

    @property
    def label(self) -> str:
        """The credential's name; a key's is its provider's ("OpenAI platform key")."""
        if self.kind is RungKind.SUBSCRIPTION:
            return self.name
        return self.name or PLATFORM_KEY_LABEL


@dataclass(slots=True)
class Walk:
    """The state of one turn's walk.

    ``origin`` is the subscription the turn started on (the assignment it read);
    ``rung_cap`` is fixed when the walk starts. ``returning`` is the plan the agent
    left moments ago (within the placement dwell): a walk takes it only when no other
    ranked plan is offered, so a refusal does not flip the agent straight back.
    """

    origin: int | None
    autonomous: bool
    rung_cap: int
    deadline: datetime
    returning: int | None = None
    tried: list[int] = field(default_factory=list)
    key_tried: bool = False
    concurrent_rerun: bool = False
    trail: list[Trial] = field(default_factory=list)

    def record(
        self,
        *,
        kind: RungKind,
        subscription_id: int | None,
        name: str,
        why: Why,
        served: bool,
        reason: str = "",
        resets_at: datetime | None = None,
    ) -> Trial:
        """Add one attempt to the trail and mark its credential tried."""
        trial = Trial(kind, subscription_id, name, why, served, reason, resets_at)
        self.trail.append(trial)
        if kind is RungKind.API_KEY:
            self.key_tried = True
        elif subscription_id is not None and subscription_id not in self.tried:
            self.tried.append(subscription_id)
        if why is Why.CONCURRENT_SWITCH:
            self.concurrent_rerun = True
        return trial

    def trail_text(self) -> str:
        """``Tried: A (rate limit) -> B (auth) -> platform API key (billing)``."""
        steps = [
            f"{t.label} ({'served' if t.served else t.reason or 'refused'})" for t in self.trail
        ]
        return "Tried: " + " -> ".join(steps)


def walk_start(
    *,
    origin: int | None,
    autonomous: bool,
    subscription_count: int,
    deadline: datetime,
    returning: int | None = None,
) -> Walk:
    """A new walk; its rung cap is ``subscription_count + 2``, computed once here."""
    return Walk(
        origin=origin,
        autonomous=autonomous,
        rung_cap=subscription_count + RUNG_CAP_EXTRA,
        deadline=deadline,
        returning=returning,
    )


def _first_candidate(
    walk: Walk, selection: Selection, *, now: datetime, last_resort: bool
) -> tuple[int, str, Why] | None:
    """The best subscription the selection offers: ranked first (the plan the agent
    is returning from only when nothing else ranks), then last resort."""
    if selection.ranked:
        best = next(
            (r for r in selection.ranked if r.candidate.subscription_id != walk.returning),
            selection.ranked[0],
        )
        why = Why.READMITTED if best.readmitted is not None else Why.RANKED
        return best.candidate.subscription_id, best.candidate.name, why
    if not last_resort:
        return None
    for candidate in selection.last_resort:
        failed_at = candidate.last_failure_at
        if walk.autonomous and (
            failed_at is not None and now - failed_at < LAST_RESORT_MIN_AGE_AUTONOMOUS
        ):
            continue
        return candidate.subscription_id, candidate.name, Why.LAST_RESORT
    return None


def _pick(
    walk: Walk, selection: Selection, *, key_available: bool, now: datetime, last_resort: bool
) -> Pick | Stop:
    found = _first_candidate(walk, selection, now=now, last_resort=last_resort)
    if found is not None:
        subscription_id, name, why = found
        if subscription_id in walk.tried:
            return Stop.ALREADY_TRIED
        return Pick(RungKind.SUBSCRIPTION, subscription_id, name, why)
    if key_available and not walk.key_tried:
        return Pick(RungKind.API_KEY, None, PLATFORM_KEY_LABEL, Why.API_KEY)
    return Stop.EXHAUSTED


def key_refused_recently(*, failure_kind: str | None, occurred_at: datetime, now: datetime) -> bool:
    """Whether the key's latest refusal (inside the 2h window) still closes its rung:
    always for an auth or billing refusal, for 5 minutes after a 429."""
    if failure_kind == "rate_limit":
        return now - occurred_at < KEY_RATE_LIMIT_PAUSE
    return True


def walk_gate(*, refusal: AttemptRefusal, origin: int | None) -> Stop | None:
    """Why a refusal cannot walk at all, before anything is ranked; None when it may.

    Only a quota or credential refusal walks, and only a turn that started on a
    subscription (an agent without one has no pool to walk).
    """
    if not refusal.walks:
        return Stop.NOT_A_CREDENTIAL_REFUSAL
    if origin is None:
        return Stop.NO_SUBSCRIPTION
    return None


def may_reissue(deadline: datetime, *, now: datetime) -> bool:
    """Whether enough of the turn's budget is left to send it again (the re-issue floor)."""
    return deadline - now >= REISSUE_FLOOR + REISSUE_SLACK


def walk_next(
    walk: Walk,
    *,
    refusal: AttemptRefusal,
    selection: Selection,
    key_available: bool,
    now: datetime,
    current_assignment: int | None = None,
    current_name: str = "",
) -> Pick | Stop:
    """The rung to try after ``refusal``, or why the walk stops.

    ``selection`` ranks the subscriptions not yet tried; ``current_assignment`` is the
    agent's assignment as it reads now (another turn may have committed a switch).
    The caller has already recorded the refused attempt with ``walk.record``.
    """
    gate = walk_gate(refusal=refusal, origin=walk.origin)
    if gate is not None:
        return gate
    if len(walk.trail) >= walk.rung_cap:
        return Stop.RUNG_CAP
    if not may_reissue(walk.deadline, now=now):
        return Stop.BUDGET
    if (
        current_assignment is not None
        and current_assignment != walk.origin
        and current_assignment not in walk.tried
        and not walk.concurrent_rerun
    ):
        return Pick(RungKind.SUBSCRIPTION, current_assignment, current_name, Why.CONCURRENT_SWITCH)
    return _pick(walk, selection, key_available=key_available, now=now, last_resort=True)


def pre_dispatch_pick(
    walk: Walk, *, selection: Selection, key_available: bool, now: datetime
) -> Pick | None:
    """Where the first attempt runs when the assigned subscription is known not to
    serve: the best viable or readmitted alternative, else the key rung; None means
    dispatch as assigned (refusing to try would turn a probably-failing turn into a
    certainly-failing one). A skip-listed plan is no better evidence than the
    assigned one, so the last resort waits for a real refusal.
    """
    picked = _pick(walk, selection, key_available=key_available, now=now, last_resort=False)
    return picked if isinstance(picked, Pick) else None
