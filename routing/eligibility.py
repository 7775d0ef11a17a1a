"""Whether a plan may serve a turn: the one judgement, facts in, a verdict out.

``admit(plan, agent, turn, *, now, role)`` answers ``Admitted`` or ``Excluded(reason,
detail)``. The gatherers read facts and never judge them: the executor's
(``execution/gathering.py``), the selection's (``subscriptions/plan_facts.py``), the
routing explainer's (the executor's, read-only) and the fleet benchmark's memory all
hand what they read here. So the assignment's verdict, affinity, pre-dispatch,
placement, the walk's candidates, the explainer's exclusions and the benchmark read
one verdict, and a rule is added in one place (``docs/flows/adding-a-rule.md``).

A turn asks one of three questions of a plan (``Role``), and the evidence answers each
its own way, on purpose:

- ``ASSIGNED``, the agent's own plan: the turn is sent there unless it is known not to
  serve. Three-state: a usable reading decides both ways, and only without one does
  a rate-limit refusal inside the skip window (a refusal mark); an auth refusal there
  is found again by sending (a replaced token serves at once). A plan forecast to run
  out before the turn ends is still admitted (``forecast_out``: the turn moves only
  to a plan that is not running out, never to the key).
- ``SESSION``, the plan that served the chat session's previous turn: the assignment's
  rule, and besides it must hold by the hysteresis floor (a plan in use leaves
  strictly below 2 % remaining) and must not be forecast to run out.
- ``ALTERNATIVE``, any other plan: offered while nothing says it refuses. A fresh
  refusing reading excludes it; a refusal of any kind inside the skip window keeps it
  out (a last resort, tried after every ranked plan) until a serving reading taken
  after it, or a reset that passed since, readmits it. The ranking
  (``headroom/ranking.py``) orders the admitted ones.

The checks, in order; the first that excludes gives the reason. For every role: the
plan is present, not paused, and allowed by the agent's routing policy. Then for an
alternative: not the agent's own plan, not tried by this turn, not serving its
concurrency cap; then what the evidence says.

Pure: no Django, no I/O, ``now`` is an argument.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from math import floor, log
from typing import NamedTuple

from routing import billing, policy
from routing.attempt_refusal import RATE_LIMIT
from routing.facts import FRESH_FOR, SKIP_WINDOW, AgentFacts, TurnFacts
from routing.headroom.balance import (
    ADMISSION_FLOOR,
    SPREAD,
    balance_of,
    balance_of_windows,
    incumbent_holds,
)
from routing.headroom.classification import (
    NO_EVIDENCE,
    Headroom,
    Instants,
    Tier,
    headroom_held,
    instants_at,
)
from routing.headroom.exhaustion_forecast import Forecast, exhausted_before
from routing.headroom.limited_now import reading_says_limited, resolve_rate_limited_now
from routing.headroom.placement import placeable
from routing.headroom.precomputed import precomputed_of
from routing.headroom.reading import CORE_WINDOWS, Reading, ReadingStatus
from routing.headroom.recovery import Verdict, readmission_verdict
from routing.headroom.refusal_windows import refusal_blocks
from routing.headroom.throttle import THROTTLE
from routing.headroom.windows import turn_windows

# An autonomous turn takes a refused plan as its last resort only this long after the
# refusal (``walk.LAST_RESORT_MIN_AGE_AUTONOMOUS``, said here in the detail).
_AUTONOMOUS_WAIT_MINUTES = 30


class Candidate(NamedTuple):
    """A plan of the provider as its row and its latest refusal state it: the plan's
    facts that come from the database (or, for an assignment, from its row in memory
    and its cached refusal mark). Built by C code from a query's rows
    (``headroom/candidates.py::candidate_row``), so every field is a column.

    The latest refusal inside the skip window, of any kind: its instant, the reset it
    carried, the window it named ("" or None: unknown; ``throttle`` for a backoff),
    its failure kind (``rate_limit`` | ``auth``; None on legacy rows).
    """

    subscription_id: int
    name: str
    agent_count: int
    last_failure_at: datetime | None = None
    last_failure_resets_at: datetime | None = None
    last_failure_window: str | None = None
    last_failure_kind: str | None = None
    # An admin paused the plan: no turn, walk or placement uses it until resumed.
    paused: bool = False
    # What the routing policy reads of the plan (``policy.PlanTerms``): None where it
    # was not read, which it need not be unless the policy restricts plans
    # (``Admission.hard_stop_only``).
    plan_type: str | None = ""
    billing_class: str | None = billing.PLAN
    overage: str | None = billing.REFUSE


class PlanFacts(NamedTuple):
    """Everything known of one plan for a turn: its ``candidate`` (row and refusal),
    what the cache holds of it (``reading``, ``forecast``; ``reachable`` False: the
    cache did not answer, so neither is known), whether it serves its concurrency cap,
    and whether it is there at all (``present`` False: deleted, without a token, or of
    another provider)."""

    candidate: Candidate
    reading: Reading | None = None
    forecast: Forecast | None = None
    reachable: bool = True
    at_capacity: bool = False
    present: bool = True


class Role(StrEnum):
    """What the turn asks of the plan (the module's docstring)."""

    ASSIGNED = "assigned"
    SESSION = "session"
    ALTERNATIVE = "alternative"


class Reason(StrEnum):
    """Why a plan may not serve the turn (``Excluded.reason``)."""

    # Deleted, without a token, or of another provider.
    ABSENT = "absent"
    # An admin paused it.
    PAUSED = "paused"
    # The agent's routing policy does not allow it (subscription-only, no hard stop).
    POLICY = "policy"
    # The agent's own plan: not an alternative to itself.
    ASSIGNED = "assigned"
    # This turn already tried it.
    TRIED = "tried"
    # Serving its concurrency cap.
    AT_CAPACITY = "at_capacity"
    # A fresh reading, or a refusal without one, says it refuses now.
    REFUSING = "refusing"
    # Refused (or reads blocked) for the turn's model family only.
    FAMILY_BLOCKED = "family_blocked"
    # A 429 without quota evidence: a short backoff.
    THROTTLED = "throttled"
    # Refused in the skip window, and nothing readmits it yet.
    SKIP_LISTED = "skip_listed"
    # (A session's plan) below the floor a plan in use holds to.
    SPENT = "spent"
    # (A session's plan) forecast to run out before the turn would end.
    FORECAST_OUT = "forecast_out"


# A turn may not run on such a plan at all: an assignment excluded for one of these is
# left even when nothing better can take the turn (it then fails or parks).
FORBIDDEN = frozenset({Reason.ABSENT, Reason.PAUSED, Reason.POLICY})
# The evidence says the plan does not serve now.
NOT_SERVING = frozenset(
    {Reason.REFUSING, Reason.FAMILY_BLOCKED, Reason.THROTTLED, Reason.SKIP_LISTED}
)


class Admitted(NamedTuple):
    """The plan (``candidate``) may serve the turn. ``tier`` and ``headroom`` are what its
    reading says (the ranking orders by them); ``readmitted`` why a refused plan serves
    again. A ranked plan is its verdict: asked for the balanced measure, a measured plan's
    verdict carries ``score``, ``limiting_window`` (the window that set it) and
    ``remaining``, which the ranking orders by (``headroom/ranking.py``).
    ``forecast_out``: forecast to run out before the turn would end (read only when its
    forecast was gathered). ``placeable`` (the assignment): it has a balanced measure,
    so placement may compare it. ``decided_by`` (the assignment, the session's plan):
    which evidence the verdict went by, for the explainer."""

    candidate: Candidate
    tier: Tier
    headroom: Headroom
    readmitted: Verdict | None = None
    score: float | None = None
    limiting_window: str | None = None
    # The lowest remaining percent of the windows that set ``score`` (balanced only).
    remaining: float | None = None
    forecast_out: bool = False
    placeable: bool = False
    decided_by: str = ""


class Excluded(NamedTuple):
    """The plan may not serve the turn: ``reason``, and ``detail`` in the operator's
    words. ``last_resort``: refused in the skip window, yet a walk may still try it
    after every admitted plan (the walk's last resort)."""

    reason: Reason
    detail: str
    last_resort: bool = False
    decided_by: str = ""

    @property
    def forbidden(self) -> bool:
        """A rule, not evidence, keeps the turn off the plan: it must be left."""
        return self.reason in FORBIDDEN

    @property
    def not_serving(self) -> bool:
        """The evidence says the plan does not serve now."""
        return self.reason in NOT_SERVING


class Judged(NamedTuple):
    """A plan the selection left out of the walk's order, and why."""

    candidate: Candidate
    verdict: Excluded


class Alternatives(NamedTuple):
    """The verdicts on many plans as alternatives: the admitted ones a reading measures,
    the admitted ones nothing measures (no usable reading, or readmitted by a reset its
    figures predate), and the excluded ones with their plans, each in the order the plans
    were given.

    The measured ones come grouped by the key the ranking orders them by, taken while
    the plan's figures are at hand (not in a second pass over 10,000 verdicts): by
    default the 10-point band of fullness. Asked for the balanced measure, ``measured``
    holds the plans above the hysteresis floor (``balance.ADMISSION_FLOOR``), by minus
    the band of their score (``balance.spread_band``), and ``spent`` the others, beside
    ``spent_keys`` (minus each one's score). Small integers, every key: no allocation,
    no hashing beyond their value."""

    measured: dict[int, list[Admitted]]
    unknown: list[Admitted]
    excluded: list[Judged]
    spent: list[Admitted]
    spent_keys: list[float]

    def verdict(self) -> Admitted | Excluded:
        """The one verdict of a single plan's judgement."""
        found = [*self.measured.values(), self.unknown, self.spent]
        for verdicts in found:
            if verdicts:
                return verdicts[0]
        return self.excluded[0].verdict


_PAUSED = Excluded(Reason.PAUSED, "paused by an admin")
_ABSENT = Excluded(Reason.ABSENT, "not a plan of this provider with a token")
_ASSIGNED = Excluded(Reason.ASSIGNED, "the agent's own plan")
_TRIED = Excluded(Reason.TRIED, "this turn tried it already")
_AT_CAPACITY = Excluded(Reason.AT_CAPACITY, "serving its concurrency cap")
_REFUSING = Excluded(Reason.REFUSING, "a fresh reading says it refuses")
_THROTTLED_DETAIL = "throttled (a 429 without quota evidence): backing off"
_SKIP_LISTED_DETAIL = "refused in the skip window"
_AUTONOMOUS_WAIT = f"; an autonomous turn waits {_AUTONOMOUS_WAIT_MINUTES} minutes after a refusal"
# Hot-path aliases: the selection judges every plan of the provider.
_MEASURED, _UNKNOWN, _REFUSING_TIER = Tier.MEASURED, Tier.UNKNOWN, Tier.REFUSING
_READMITTED_BY_RESET = Verdict.WINDOW_RESET
_ADMISSION_FLOOR, _LOG_SPREAD = ADMISSION_FLOOR, log(SPREAD)
_OK = ReadingStatus.OK
_new = tuple.__new__
# How the selection reads a plan's cached reading by id (None: none stored).
_ReadingOf = Callable[[int], Reading | None]


@dataclass(frozen=True, slots=True)
class Admission:
    """What every plan's verdict for one turn shares, computed once: the agent's and the
    turn's facts as ``admit`` reads them. ``admit`` builds one per plan; a selection
    builds one and judges the provider's plans with it (``alternative``, the same
    checks, one call per plan)."""

    now: datetime
    provider: str
    routing_policy: str = policy.THRIFTY
    # The agent's assignment (None: it has none).
    origin: int | None = None
    family: str | None = None
    autonomous: bool = False
    max_age: timedelta = FRESH_FOR
    skip_window: timedelta = SKIP_WINDOW
    # How long the turn is expected to run from ``now`` (the forecasts).
    expected_turn: timedelta = timedelta(0)
    tried: Collection[int] = frozenset()
    at_capacity: Collection[int] = frozenset()
    instants: Instants = field(init=False)
    hard_stop_only: bool = field(init=False)
    # A refusal after this instant counts (inside the skip window).
    skip_since: datetime = field(init=False)
    # The skip-listed verdict per refusal window named, made as the selection meets one.
    skip_listed_by_window: dict[str | None, Excluded] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "instants", instants_at(self.now, self.max_age))
        object.__setattr__(self, "skip_since", self.now - self.skip_window)
        object.__setattr__(self, "hard_stop_only", policy.only_hard_stop(self.routing_policy))

    @classmethod
    def of(
        cls,
        agent: AgentFacts,
        turn: TurnFacts,
        *,
        now: datetime,
        tried: Collection[int] = frozenset(),
        at_capacity: Collection[int] = frozenset(),
    ) -> Admission:
        """The admission of ``turn`` of ``agent`` at ``now``."""
        return cls(
            now=now,
            provider=turn.provider,
            routing_policy=agent.routing_policy,
            origin=agent.origin,
            family=turn.family,
            autonomous=turn.autonomous,
            max_age=turn.fresh_for,
            skip_window=turn.skip_window,
            expected_turn=turn.expected_turn(now),
            tried=tried,
            at_capacity=at_capacity,
        )

    def judge(self, plan: PlanFacts, role: Role) -> Admitted | Excluded:
        """``plan``'s verdict in ``role`` (``admit``)."""
        if not plan.present:
            return _ABSENT
        candidate = plan.candidate
        if role is Role.ALTERNATIVE:
            pk = candidate[0]
            admission = replace(self, at_capacity={pk}) if plan.at_capacity else self
            reading = plan.reading if plan.reachable else None
            readings = {pk: reading} if reading is not None else {}
            verdict = admission.alternatives([candidate], readings).verdict()
            if isinstance(verdict, Admitted) and plan.reachable and plan.forecast is not None:
                return verdict._replace(forecast_out=self.runs_out(plan.forecast))
            return verdict
        forbidden = self._forbidden(candidate, role)
        if forbidden is not None:
            return forbidden
        if not plan.reachable:  # nothing known: the turn goes as assigned
            return Admitted(candidate, Tier.UNKNOWN, NO_EVIDENCE, decided_by="unreachable")
        return _incumbent(self, plan, role)

    # Every role

    def _forbidden(self, candidate: Candidate, role: Role) -> Excluded | None:
        """A rule that keeps every turn of this agent off the plan, whatever it reads."""
        own = role is not Role.ALTERNATIVE
        if candidate[7]:  # paused
            return (
                Excluded(Reason.PAUSED, f"its subscription {candidate[1]!r} is paused")
                if own
                else _PAUSED
            )
        if self.hard_stop_only:
            # Terms not read (None) fail closed: no hard stop is known of the plan.
            entry = billing.classify(self.provider, candidate[8] or "")
            terms = policy.PlanTerms(entry, candidate[9] or "", candidate[10] or "")
            if not policy.plan_verdict(routing_policy=self.routing_policy, plan=terms).allowed:
                return Excluded(Reason.POLICY, _policy_detail(candidate, entry.label, own=own))
        return None

    # The alternatives (the selection judges every plan of the provider with this)

    def alternatives(
        self,
        candidates: Sequence[Candidate],
        readings: Mapping[int, Reading],
        *,
        balanced: bool = False,
    ) -> Alternatives:
        """Each of ``candidates``' verdict as an alternative, from its row and its cached
        reading in ``readings`` (absent: none stored): the admitted ones, in the order
        given, and the excluded ones with their verdicts. One loop, the judgement itself:
        the selection judges every plan of the provider with it, ``judge`` a single plan
        (so the checks live once), with what every verdict shares read once.
        ``balanced``: a measured plan's verdict also carries its balanced measure
        (``score``, ``limiting_window``, ``remaining``), and the measured ones come
        split at the hysteresis floor (``Alternatives``)."""
        # The selection judges 10,000 plans here: the loop runs on locals, makes no call
        # of its own on a measured plan's way and builds each verdict as a literal tuple
        # in one step (no unpacking). A missing group is made on first use.
        found = Alternatives(defaultdict(list), [], [], [], [])
        self._judge_into(found, candidates, readings.get, balanced)
        return found

    def _judge_into(
        self, found: Alternatives, candidates: Sequence[Candidate], get: _ReadingOf, balanced: bool
    ) -> None:
        """``alternatives``' one loop, its verdicts added to ``found`` (the hot path)."""
        measured, unmeasured, exclude = found.measured, found.unknown.append, found.excluded.append
        special, refusing_tier, measured_tier = self._out_of_walk().get, _REFUSING_TIER, _MEASURED
        restricts, family, new, admitted = self.hard_stop_only, self.family, _new, Admitted
        now_us, max_age_us = self.instants[0], self.instants[0] - self.instants[1]
        for row in candidates:
            out = special(pk := row[0])
            if out is not None or row[7] or restricts:  # out of this walk, paused, a policy
                out = self._forbidden(row, Role.ALTERNATIVE) or out
                if out is not None:
                    exclude(new(Judged, (row, out)))
                    continue
            reading = get(pk)
            if reading is None:
                held, headroom = None, NO_EVIDENCE
            else:
                figures = reading._precomputed
                if figures is None:
                    figures = precomputed_of(reading)
                # ``headroom_held``'s memo read inline (a call per plan saved), windows too.
                held = figures[9].get(family)
                if held is None or not (held[0] <= now_us < held[1] and held[2] == max_age_us):
                    headroom_held(reading, figures, self.instants, family)
                    held = figures[9][family]
                headroom = held[3]
            tier, readmitted = headroom[0], None
            if tier is refusing_tier or row[3] is not None:  # refuses, or refused lately
                readmitted = self._refused(row, reading, headroom)
                if type(readmitted) is Excluded:
                    exclude(new(Judged, (row, readmitted)))
                    continue
            if tier is not measured_tier or readmitted is _READMITTED_BY_RESET:
                # A reset readmits as unknown: its figures describe the window that ended.
                verdict = new(
                    admitted,
                    (row, _UNKNOWN, headroom, readmitted, None, None, None, False, False, ""),
                )
                unmeasured(verdict)
                continue
            if not balanced or held is None:  # banded: by 10-point band of fullness
                verdict = new(
                    admitted,
                    (row, tier, headroom, readmitted, None, None, None, False, False, ""),
                )
                measured[headroom[6] or 0].append(verdict)  # a measured band is never None
                continue
            score, left, limiting = balance_of_windows(held[4], held[5], now_us)
            verdict = new(
                admitted,
                (row, tier, headroom, readmitted, score, limiting, left, False, False, ""),
            )
            if left > _ADMISSION_FLOOR:
                # ``balance.spread_band`` inlined (a call per plan saved): the score is > 0.
                measured[-floor(log(score) / _LOG_SPREAD)].append(verdict)
            else:
                found.spent.append(verdict)
                found.spent_keys.append(-score)

    def _out_of_walk(self) -> dict[int, Excluded]:
        """The plans out of this turn's walk whatever they read, by id (the agent's own
        plan, those this turn tried, those serving their concurrency cap)."""
        out = {
            **dict.fromkeys(self.at_capacity, _AT_CAPACITY),
            **dict.fromkeys(self.tried, _TRIED),
        }
        if self.origin is not None:
            out[self.origin] = _ASSIGNED
        return out

    def _refused(
        self, candidate: Candidate, reading: Reading | None, headroom: Headroom
    ) -> Excluded | Verdict | None:
        """An alternative that refuses, or was refused lately: why it is out (a fresh
        reading refuses; a refusal in the skip window, and nothing readmits it yet),
        else what readmits it (None: no refusal counts against this turn)."""
        if headroom[0] is _REFUSING_TIER:
            return self._refusing(reading)
        failed_at, window, family = candidate[3], candidate[5], self.family
        if failed_at is None or not refusal_blocks(window, family):
            return None
        readmitted = readmission_verdict(
            reading, headroom, self.now, failed_at, family, candidate[4]
        )
        if readmitted is not None or failed_at <= self.skip_since:
            return readmitted
        # The skip-listed verdicts are alike per refusal window named: one each.
        skipped = self.skip_listed_by_window.get(window)
        if skipped is None:
            skipped = self.skip_listed_by_window[window] = self._skip_listed(candidate)
        return skipped

    def _refusing(self, reading: Reading | None) -> Excluded:
        """A fresh reading refuses: for the turn's family only when the reading serves
        and no core window of it blocks."""
        family = self.family
        if reading is not None and family is not None and reading.status is _OK:
            windows = reading.windows
            core_blocked = any(w.blocking for n in CORE_WINDOWS if (w := windows.get(n)))
            found = windows.get(family)
            if not core_blocked and found is not None and found.blocking:
                return Excluded(
                    Reason.FAMILY_BLOCKED,
                    f"a fresh reading says it refuses for {family}, which this model spends",
                )
        return _REFUSING

    def _skip_listed(self, candidate: Candidate) -> Excluded:
        """Refused in the skip window and not readmitted: why, and the last resort."""
        window = candidate[5] or ""
        if window == THROTTLE:
            reason, detail = Reason.THROTTLED, _THROTTLED_DETAIL
        elif window and window not in CORE_WINDOWS and refusal_blocks(window, self.family):
            reason, detail = Reason.FAMILY_BLOCKED, f"refused for {window}, which this model spends"
        else:
            reason = Reason.SKIP_LISTED
            detail = f"{_SKIP_LISTED_DETAIL} ({window})" if window else _SKIP_LISTED_DETAIL
        if self.autonomous:
            detail += _AUTONOMOUS_WAIT
        return Excluded(reason, detail, True)

    def runs_out(self, forecast: Forecast | None) -> bool:
        """Whether one of the windows the turn spends runs out strictly before the turn
        is expected to end, at its recent burn rate (no forecast, or no expected
        length: no)."""
        if forecast is None or self.expected_turn <= timedelta(0):
            return False
        return exhausted_before(
            forecast,
            now=self.now,
            ends_at=self.now + self.expected_turn,
            windows=turn_windows(self.family),
            max_age=self.max_age,
        )


def _incumbent(admission: Admission, plan: PlanFacts, role: Role) -> Admitted | Excluded:
    """The plan the turn would start on anyway (its assignment, or the session's plan):
    sent there unless known not to serve (the module's docstring)."""
    candidate, reading = plan.candidate, plan.reading
    mark = _mark(admission, candidate)
    refusing = _limited(admission, reading, mark)
    decided_by = _decided_by(admission, reading, candidate[3], refusing)
    if refusing:
        if mark is not None and mark[5] == THROTTLE and not _limited(admission, reading, None):
            detail = "throttled (a 429 without quota evidence): backing off"
            return Excluded(Reason.THROTTLED, detail, decided_by=decided_by)
        detail = _REFUSING.detail if decided_by == "reading" else "refused in the skip window"
        return Excluded(Reason.REFUSING, detail, decided_by=decided_by)
    headroom = NO_EVIDENCE
    if reading is not None:
        figures = precomputed_of(reading)
        headroom = headroom_held(reading, figures, admission.instants, admission.family)
    balance = balance_of(
        reading, now=admission.now, max_age=admission.max_age, family=admission.family
    )
    out = admission.runs_out(plan.forecast)
    if role is Role.SESSION:
        if balance is not None and not incumbent_holds(balance):
            detail = f"{balance.remaining:g} % left of {balance.window}: below the floor"
            return Excluded(Reason.SPENT, detail, decided_by=decided_by)
        if out:
            detail = "forecast to run out before the turn would end"
            return Excluded(Reason.FORECAST_OUT, detail, decided_by=decided_by)
        return Admitted(candidate, headroom.tier, headroom, decided_by=decided_by)
    fits = placeable(reading, now=admission.now, max_age=admission.max_age, family=admission.family)
    return Admitted(
        candidate,
        headroom.tier,
        headroom,
        forecast_out=out,
        placeable=fits,
        decided_by=decided_by,
    )


def _mark(admission: Admission, candidate: Candidate) -> Candidate | None:
    """The plan's latest refusal while it counts against this turn: inside the skip
    window, and about a window this turn spends (``refusal_blocks``)."""
    at = candidate[3]
    if at is None or at <= admission.skip_since:
        return None  # aged out of the window refusals count in
    if not refusal_blocks(candidate[5], admission.family):
        return None  # another family's block: this turn spends none of that window
    return candidate


def _limited(admission: Admission, reading: Reading | None, mark: Candidate | None) -> bool:
    """Whether the provider limits the plan now: the three-state rule
    (``resolve_rate_limited_now``) on the reading and the refusal ``mark``."""
    return resolve_rate_limited_now(
        reading,
        now=admission.now,
        max_age=admission.max_age,
        events_say_limited=lambda: mark is not None and mark[6] == RATE_LIMIT,
        last_refusal_at=mark[3] if mark is not None else None,
        refusal_resets_at=mark[4] if mark is not None else None,
        family=admission.family,
        refusal_window=(mark[5] or None) if mark is not None else None,
    )


def _decided_by(
    admission: Admission, reading: Reading | None, refused_at: datetime | None, refusing: bool
) -> str:
    """Which evidence the three-state rule went by: a usable ``reading``, else the
    refusal (when it refuses), else none."""
    decided = reading_says_limited(
        reading,
        now=admission.now,
        max_age=admission.max_age,
        last_refusal_at=refused_at,
        family=admission.family,
    )
    if decided is not None:
        return "reading"
    return "refusal" if refusing else "no_evidence"


def _policy_detail(candidate: Candidate, label: str, *, own: bool) -> str:
    """Why the subscription-only policy forbids the plan, in the operator's words."""
    if own:
        return (
            f"its routing policy is subscription-only and its subscription {candidate[1]!r} "
            f"({label}, overage: {candidate[10]}) is not a plan that refuses past its quota"
        )
    return (
        "its policy (subscription-only) allows only plans that refuse past their quota; "
        f"this one's overage: {candidate[10]}"
    )


def admit(
    plan: PlanFacts,
    agent: AgentFacts,
    turn: TurnFacts,
    *,
    now: datetime,
    role: Role,
    tried: Collection[int] = frozenset(),
) -> Admitted | Excluded:
    """Whether ``plan`` may serve ``turn`` of ``agent`` at ``now`` in ``role``, and if
    not, why (the module's docstring). ``tried``: the plans this turn already tried."""
    return Admission.of(agent, turn, now=now, tried=tried).judge(plan, role)


def forbidden(
    candidate: Candidate, agent: AgentFacts, turn: TurnFacts, *, now: datetime
) -> Excluded | None:
    """``admit``'s verdict on the agent's assignment from its row alone, when a rule
    forbids it (paused, not allowed by the policy), else None: what the turn knows as
    soon as its agent is ready, before anything cached is read."""
    facts = PlanFacts(candidate, reachable=False)
    verdict = Admission.of(agent, turn, now=now).judge(facts, Role.ASSIGNED)
    return verdict if isinstance(verdict, Excluded) and verdict.forbidden else None
