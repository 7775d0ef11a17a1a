"""Run a turn: create the Execution, dispatch it (walking the pool on a refusal), finish it.

One dispatch loop serves task and chat, sync and async. Its I/O is here; its
decisions are the pure rules': ``subscriptions/classifier.py`` says what a refusal
means, ``subscriptions/walk.py`` which rung comes next. Every rung is a trial: the
same execution id re-issued with ``auth_override``; nothing in the database or the
agent changes until a trial serves, and then the subscription that served is
committed once (``assignment_commit``, a compare-and-set across processes).

The served path costs one write before dispatch (the row), one cached read (the
pre-dispatch evidence), one pooled request and one write after; ranking and the
walk run only after a refusal.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Sum

from agents import lifecycle
from agents.client import TURN_TIMEOUT_MARGIN, AgentServerUnavailable, TurnOutcome
from agents.models import Agent, AuthMode, ProcessState
from agents.rung import Rung, RungKind
from execution import affinity, key_budgets, parking
from execution.models import Execution, Schedule, Status
from execution.selectors import notifications_visible_to
from subscriptions import breaker, leases, policy, pool
from subscriptions.budgets import BudgetClosed, key_budget_notify
from subscriptions.classifier import (
    QUOTA_REASONS,
    QuotaEvidence,
    Refusal,
    classify_refusal,
)
from subscriptions.headroom.alternatives import Selection
from subscriptions.headroom.feed import headroom_reading_observe
from subscriptions.headroom.recovery import earliest_known_reset
from subscriptions.headroom.selection import rank_alternatives
from subscriptions.headroom.store import TurnEvidence, snapshots_read, turn_evidence_read
from subscriptions.headroom.windows import family_window
from subscriptions.services import (
    assignment_commit,
    record_rate_limit_event,
    switch_record,
)
from subscriptions.walk import (
    Pick,
    Stop,
    Walk,
    Why,
    may_reissue,
    pre_dispatch_pick,
    walk_gate,
    walk_next,
    walk_start,
)
from trinity import clock, metrics
from trinity.errors import TooManyTurns
from trinity.logging_json import log_context, log_context_update
from trinity.models import Notification, SystemSettings
from trinity.notifications import notification_send
from trinity.redaction import redact
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)

# A row is reaped (``worker_lost``) only once even the last HTTP wait of its turn is
# over: the turn's budget, the client's margin, and slack for finishing the row.
DEADLINE_SLACK = timedelta(seconds=TURN_TIMEOUT_MARGIN + 30)
ERROR_DETAIL_MAX = 2000
KEY_NOTICE_TTL = 24 * 3600
# Tokens a walk decrypts at once: its pick and the next ones in rank order (a walk
# rarely tries more; decrypting all of a large pool cost most of a walked turn).
RUNG_BATCH = 8
EXHAUSTED_NOTICE_TTL = 3600
# Stops that mean every credential the walk could try refused.
EXHAUSTED_STOPS = frozenset({Stop.EXHAUSTED, Stop.ALREADY_TRIED, Stop.RUNG_CAP})
# What serving a turn changes on its row (the message, up to 200 kB, is not re-sent).
SERVED_FIELDS = [
    "status",
    "response",
    "model",
    "served_by_kind",
    "served_by_subscription",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "attempts",
    "finished_at",
    "subscription_switch",
]


def turn_timeout(requested: float | None) -> float:
    """The turn's budget: what the caller asked for, else the default, never past the max."""
    return min(
        float(requested or settings.TRINITY_TURN_TIMEOUT_SECONDS),
        float(settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS),
    )


def execution_create(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    session_id: str = "",
    queued: bool = False,
    schedule: Schedule | None = None,
) -> Execution:
    """Create the turn's row: ``running`` (about to dispatch) or ``queued`` (async).

    The deadline covers the whole turn, walk included; the reaper fails a row left
    ``running`` past it. ``schedule`` is the schedule that fired it, if one did.
    """
    now = clock.now()
    timeout = turn_timeout(timeout_seconds)
    return Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        trigger=trigger,
        message=message,
        model=model or "",
        session_id=session_id,
        status=Status.QUEUED if queued else Status.RUNNING,
        created_at=now,
        deadline=now + timedelta(seconds=timeout) + DEADLINE_SLACK,
        dispatched_at=None if queued else now,
        schedule=schedule,
    )


# A refused turn may come back this soon: in-flight turns finish in seconds to minutes.
TURN_RETRY_AFTER_SECONDS = 5


def execution_admit(*, execution: Execution, record_refusal: bool) -> None:
    """Admit a committed turn under its agent's ``TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT``
    (queued plus running, this turn included), or withdraw it and raise TooManyTurns.

    Call it once the turn's row is committed. A withdrawn turn is deleted (its caller
    is answered 429 and was never told its id), or with ``record_refusal`` recorded as
    a failed turn (``too_many_turns``), for a turn with no caller to answer.

    The served path pays one statement, a count on the partial index
    ``execution_agent_in_flight``, with no lock: counted after the commit, of two turns
    racing for the last place the later counter sees the other's row, so the quick
    count can admit too few, never too many. Over the cap on that count (a burst, or a
    full agent), the turn is decided again under a lock on the agent's row, where the
    refused leave the count before the next decides: a burst of N admits exactly
    min(N, room), never more in any process.
    """
    if _in_flight(execution) <= settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT:
        return
    agent_id = execution.agent_id
    assert agent_id is not None  # noqa: S101 - a turn being admitted was just created on it
    with transaction.atomic():
        Agent.objects.select_for_update().filter(pk=agent_id).values_list("pk").first()
        limit = settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT
        if _in_flight(execution) <= limit:
            return
        refusal = TooManyTurns(
            f"Agent {execution.agent_name!r} is at its cap of {limit} queued or running "
            "turns; retry when one finishes.",
            retry_after=TURN_RETRY_AFTER_SECONDS,
        )
        if record_refusal:
            _finish_failed(execution, error_code=TooManyTurns.code, detail=refusal.message)
        else:
            Execution.objects.filter(pk=execution.pk).delete()
    raise refusal


def _in_flight(execution: Execution) -> int:
    return Execution.objects.filter(
        agent=execution.agent, status__in=[Status.QUEUED, Status.RUNNING]
    ).count()


def execution_run(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    session_id: str = "",
) -> Execution:
    """Run one turn synchronously and return the finished Execution.

    Never raises for a turn that failed: the Execution carries status and error_code.
    Raises TooManyTurns, with no row left, when the agent is at its turns cap.
    """
    execution = execution_create(
        agent=agent,
        message=message,
        trigger=trigger,
        model=model,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
    )
    execution_admit(execution=execution, record_refusal=False)
    return execution_dispatch(execution=execution, agent=agent)


def execution_claim(*, execution_id: str, now: datetime) -> Execution | None:
    """Claim a queued turn for dispatch (async): None when it is not queued any more.

    A redelivered task for a turn that already started or finished claims nothing, so
    no turn is ever dispatched twice.
    """
    claimed = Execution.objects.filter(pk=execution_id, status=Status.QUEUED).update(
        status=Status.RUNNING, dispatched_at=now
    )
    if claimed != 1:
        return None
    return Execution.objects.select_related("agent__subscription").get(pk=execution_id)


def execution_dispatch(*, execution: Execution, agent: Agent) -> Execution:
    """The dispatch loop. Every path finishes the row; never raises for a failed turn.

    A bug anywhere in the loop fails the turn ``container_fault`` with its traceback
    in the (redacted) log, instead of leaving the row ``running``.
    """
    turn = _Turn(execution, agent)
    # Only an assignment already loaded with the agent names it: no query for a log field.
    assigned = agent.subscription if Agent.subscription.is_cached(agent) else None
    with log_context(
        execution_id=str(execution.pk),
        agent=agent.name,
        subscription=assigned.name if assigned is not None else "",
    ):
        try:
            finished = turn.run()
        except DatabaseError:
            finished = _finish_after_database_loss(execution)
        except Exception:
            logger.exception("turn %s on %s: internal error", execution.pk, agent.name)
            finished = _finish_failed(
                execution,
                error_code="container_fault",
                detail="internal error in the platform while running the turn (see its log)",
            )
        # A path that ended between the reservation and its settle (a bug, a lost
        # database): the attempt's cost is unknown, so it is charged at the estimate.
        with contextlib.suppress(DatabaseError):
            turn.key_settle(None)
        turn.protection_release(finished)
        turn.observe(finished)
    return finished


@dataclass
class _Turn:
    execution: Execution
    agent: Agent
    origin: int | None = None
    walk: Walk | None = None
    system: SystemSettings | None = None
    rungs: dict[int, Rung] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    legacy: bool = False
    legacy_restarts: int = 0
    legacy_committed: bool = False
    upstream_retried: bool = False
    last_selection: Selection | None = None
    # For the metrics: when the loop started, how long it waited on agent servers,
    # where pre-dispatch routed the first attempt, whether the walk ran out.
    started: float = field(default_factory=time.perf_counter)
    waited: float = 0.0
    routed: str = ""
    exhausted: bool = False
    # A key-budget reservation this turn holds and has not settled yet.
    key_reserved: bool = False
    # Whether this turn is its provider's half-open breaker trial; the subscription it
    # holds a concurrency lease on; the provider's capped subscriptions (loaded once).
    breaker_trial: bool = False
    lease_on: int | None = None
    caps: dict[int, int] | None = None

    @property
    def budget_end(self) -> datetime:
        assert self.execution.deadline is not None
        return self.execution.deadline - DEADLINE_SLACK

    def settings(self) -> SystemSettings:
        if self.system is None:
            self.system = system_settings_get()
        return self.system

    def switching_stop(self) -> Stop | None:
        """Why this agent may not switch at all (auto-switch off, pinned), or None."""
        return pool.switching_stop(agent=self.agent, system=self.settings())

    @contextlib.contextmanager
    def _agent_server_wait(self) -> Iterator[None]:
        sent = time.perf_counter()
        try:
            yield
        finally:
            self.waited += time.perf_counter() - sent

    def observe(self, execution: Execution) -> None:
        """Count the finished turn (trinity/metrics.py): from memory, no reads."""
        if execution.status == Status.PARKED:
            return  # not finished: counted once, when its re-run finishes
        served = execution.status == Status.SUCCEEDED
        if served:
            kind = execution.served_by_kind
        else:
            kind = self.attempts[-1]["credential_kind"] if self.attempts else ""
        credential = metrics.credential_kind(kind)
        metrics.turn_finished(
            succeeded=served,
            error_code=execution.error_code,
            credential=credential,
            rungs=len(self.attempts),
            switched=served and bool((execution.subscription_switch or {}).get("committed")),
            routed=self.routed,
            exhausted=self.exhausted,
            input_tokens=execution.input_tokens or 0,
            output_tokens=execution.output_tokens or 0,
            key_usd=float(execution.cost_usd or 0) if served and credential == metrics.KEY else 0,
            overhead_seconds=time.perf_counter() - self.started - self.waited,
        )

    # The loop

    def run(self) -> Execution:
        if not self._breaker_admits():
            return self._provider_outage()
        unready = self._ready_agent()
        if unready is not None:
            return unready
        agent = self.agent
        self.origin = agent.subscription_id
        rung = lifecycle.baseline_rung(agent)
        why = Why.ASSIGNED
        # A policy that forbids the assignment (subscription-only on an overage plan,
        # or with none) routes to a plan it allows or refuses: never a billable fallback.
        forbidden = pool.assignment_policy_refusal(agent)
        routed = self._policy_route() if forbidden else self._affinity() or self._pre_dispatch()
        if forbidden and routed is None:
            return self._policy_refused(forbidden)
        if routed is not None:
            rung, why = routed
        retrying = False
        while True:
            if not self._lease_take(rung):
                around = self._route_around_cap(rung)
                if around is None:
                    return self._at_capacity(rung)
                rung, why = around
                continue
            outcome = self._attempt(rung)
            if outcome is None:
                return self.execution
            ran_on = rung if rung is None or rung.echoed_by(outcome.override_echo) else None
            if rung is not None and ran_on is None:
                self._enter_legacy()
                ran_on = lifecycle.baseline_rung(self._reload_agent())
            self._note_attempt(ran_on, Why.RETRY if retrying else why, outcome)
            if outcome.ok:
                return self._served(ran_on, why, outcome)
            refusal = classify_refusal(
                error_code=outcome.error_code,
                detail=outcome.detail,
                evidence=QuotaEvidence(outcome.resets_at, outcome.limiting_window),
            )
            if self._breaker_opens(ran_on, refusal):
                return self._provider_outage()  # no retry into the outage
            retrying = self._retries(refusal)
            if retrying:
                continue  # the same rung, as chosen: nothing is recorded or walked
            # Recorded as it happens, against what was sent, before auto-switch is read:
            # concurrent turns see it, and an operator with auto-switch off still does.
            self._record_refusal(ran_on, refusal, outcome)
            step = self._next(ran_on, why, refusal, outcome)
            if not isinstance(step, Pick):
                return self._refused(refusal, outcome, step)
            if breaker.breaker_open_now(provider=agent.provider, now=clock.now()):
                return self._provider_outage()  # the next rung would meet the outage
            next_rung = self._materialize(step)
            if next_rung is None:
                return self._refused(refusal, outcome, Stop.EXHAUSTED)
            if self.legacy and not self._apply_legacy(next_rung):
                return self._refused(refusal, outcome, Stop.EXHAUSTED)
            rung, why = next_rung, step.why

    def _ready_agent(self) -> Execution | None:
        """Start the agent's server if it is not up, and take a forbidden boot key
        away from it; the failed Execution when either cannot be done, else None."""
        agent = self.agent
        if agent.process_state != ProcessState.RUNNING or not agent.endpoint:
            try:
                with self._agent_server_wait():
                    agent = self.agent = lifecycle.agent_start(agent=agent)
            except lifecycle.AgentStartFailed as exc:
                return self._fail("container_fault", f"the agent could not start: {exc}")
            if not agent.endpoint:
                detail = agent.process_detail or "its server did not come up in time"
                return self._fail("container_fault", f"the agent could not start: {detail}")
        if lifecycle.baseline_rung(agent) is None and agent.auth_mode == AuthMode.API_KEY:
            # Booted on the key, which the verdict no longer allows (the admin turned the
            # fallback off): a turn sent without an override would run on that boot key.
            # Rare (the switch re-applies credentials); the row is in memory: no query.
            lifecycle.agent_apply_credentials(agent=agent)
            agent = self.agent = self._reload_agent()
            if agent.auth_mode == AuthMode.API_KEY:
                return self._fail("container_fault", "the agent still holds the platform key")
        return None

    def _retries(self, refusal: Refusal) -> bool:
        """Whether to send the same rung once more: only after an ``upstream_error``, at
        most once per turn, and only with the re-issue floor of the budget left.

        A provider 5xx says nothing about the credential, so it never walks: every plan
        would meet the same outage, and blaming one would skip-list it. One retry rides
        out a blip; a second would spend the budget re-issuing into an outage.
        """
        if refusal.error_code != "upstream_error" or self.upstream_retried:
            return False
        if not may_reissue(self.budget_end, now=clock.now()):
            return False
        self.upstream_retried = True
        return True

    def _attempt(self, rung: Rung | None) -> TurnOutcome | None:
        """Send one attempt with the turn's remaining budget; None when the turn ended."""
        remaining = (self.budget_end - clock.now()).total_seconds()
        log_context_update(
            subscription=rung.name
            if rung is not None and rung.kind is RungKind.SUBSCRIPTION
            else ""
        )
        if remaining < 1:
            self._fail("timeout", "the turn's time budget ran out before it could be sent")
            return None
        if rung is not None and rung.kind is RungKind.API_KEY and not self._key_reserve():
            return None
        try:
            with self._agent_server_wait():
                outcome = lifecycle.client_for(self.agent).run_turn(
                    execution_id=str(self.execution.pk),
                    message=self.execution.message,
                    timeout_seconds=remaining,
                    model=self.execution.model or self.agent.model or None,
                    rung=None if self.legacy else rung,
                    session_id=self.execution.session_id or None,
                )
        except AgentServerUnavailable as exc:
            self.key_settle(None)
            self._fail("container_fault", str(exc))
            return None
        self.key_settle(outcome)
        return outcome

    # Protection: the provider's circuit breaker and the concurrency leases

    def _breaker_admits(self) -> bool:
        """Whether the provider's breaker lets this turn be sent (closed, degraded, or
        half-open with this turn as its one trial). One cache round trip."""
        assert self.execution.deadline is not None
        trial_seconds = int((self.execution.deadline - clock.now()).total_seconds()) + 1
        admitted, self.breaker_trial = breaker.breaker_turn_gate(
            provider=self.agent.provider,
            now=clock.now(),
            trial_seconds=trial_seconds,
            holder=str(self.execution.pk),
        )
        return admitted

    def _breaker_opens(self, ran_on: Rung | None, refusal: Refusal) -> bool:
        """Count a provider-level failure (5xx, timeout) against the provider; True when
        the breaker is open after it. Account refusals never count."""
        if not breaker.is_provider_failure(refusal.error_code):
            return False
        kind, subscription_id = ran_on.key if ran_on else ("subscription", self.origin)
        state = breaker.breaker_failure_observe(
            provider=self.agent.provider, credential=f"{kind}:{subscription_id}", now=clock.now()
        )
        return state is breaker.BreakerState.OPEN

    def _provider_outage(self) -> Execution:
        self.execution.walk_stop = Stop.PROVIDER_OUTAGE.value
        detail = breaker.outage_detail(self.agent.provider, sent=bool(self.attempts))
        return self._fail("upstream_error", detail)

    def _cap_of(self, subscription_id: int) -> int | None:
        """The subscription's concurrency cap: the assignment's from the row loaded with
        the agent (no query on the served path), the others' from one query per turn."""
        assigned = self.agent.subscription if Agent.subscription.is_cached(self.agent) else None
        if assigned is not None and assigned.pk == subscription_id:
            return assigned.max_concurrency
        return self._caps().get(subscription_id)

    def _caps(self) -> dict[int, int]:
        if self.caps is None:
            self.caps = leases.subscription_caps(self.agent.provider)
        return self.caps

    def _at_capacity_ids(self, now: datetime) -> set[int]:
        """The capped subscriptions serving their cap, bar the one this turn holds."""
        caps = {pk: cap for pk, cap in self._caps().items() if pk != self.lease_on}
        return leases.subscriptions_at_capacity(caps, now=now)

    def _lease_take(self, rung: Rung | None) -> bool:
        """Hold a lease on ``rung``'s subscription (if capped) until the turn's deadline;
        False when it serves its cap. Moving to another rung gives the old lease back;
        an unreachable store enforces no cap."""
        if rung is None or rung.kind is not RungKind.SUBSCRIPTION or rung.subscription_id is None:
            self._lease_give()
            return True
        if rung.subscription_id == self.lease_on:
            return True  # a retry on the same plan keeps its slot
        self._lease_give()
        cap = self._cap_of(rung.subscription_id)
        if cap is None:
            return True
        assert self.execution.deadline is not None
        taken = leases.lease_acquire(
            subscription_id=rung.subscription_id,
            holder=str(self.execution.pk),
            cap=cap,
            expires_at=self.execution.deadline,
            now=clock.now(),
        )
        if taken is False:
            return False
        if taken:
            self.lease_on = rung.subscription_id
        return True

    def _lease_give(self) -> None:
        if self.lease_on is not None:
            leases.lease_release(subscription_id=self.lease_on, holder=str(self.execution.pk))
            self.lease_on = None

    def _route_around_cap(self, rung: Rung | None) -> tuple[Rung, Why] | None:
        """Where a turn goes when ``rung``'s plan serves its cap: like a plan known not to
        serve, the best viable alternative, else the key rung; None when there is none
        (or the agent may not switch). The busy plan is not offered again this turn."""
        assert rung is not None and rung.subscription_id is not None
        metrics.routed_at_capacity()
        logger.info("turn %s: %s is serving its concurrency cap", self.execution.pk, rung.name)
        if self.legacy or self.switching_stop() is not None:
            return None  # a legacy agent applies rungs by assignment: no rerouting here
        walk = self._walk()
        if rung.subscription_id not in walk.tried:
            walk.tried.append(rung.subscription_id)
        now = clock.now()
        pick = pre_dispatch_pick(
            walk,
            selection=self._selection(now),
            key_available=self._key_available(now),
            now=now,
        )
        routed = self._materialize(pick) if pick is not None else None
        if pick is None or routed is None:
            return None
        if self.attempts:
            return routed, pick.why
        # Before any attempt this is pre-dispatch routing, and counted as such.
        self.routed = metrics.KEY if routed.kind is RungKind.API_KEY else metrics.PLAN
        return routed, Why.AT_CAPACITY

    def _at_capacity(self, rung: Rung | None) -> Execution:
        self.execution.walk_stop = Stop.AT_CAPACITY.value
        name = rung.name if rung is not None else "the subscription"
        return self._fail(
            "billing",
            f"{name} is serving its concurrency cap and no other credential this agent may "
            "use is free; the turn was not sent. Retry shortly.",
        )

    def protection_release(self, finished: Execution) -> None:
        """Give back the turn's lease and settle its breaker trial; never raises."""
        self._lease_give()
        if self.breaker_trial:
            self.breaker_trial = False
            verdict = breaker.trial_verdict(
                [a["error_code"] or "" for a in self.attempts],
                served=finished.status == Status.SUCCEEDED,
            )
            breaker.breaker_trial_end(
                provider=self.agent.provider, provider_failed=verdict, holder=str(self.execution.pk)
            )

    # The key rung's spend budgets

    def _key_reserve(self) -> bool:
        """Admit the key rung against its budgets before it is sent; False when a budget
        is closed (the turn is then finished, failed with the budget's reason)."""
        admitted = key_budgets.turn_key_reserve(
            execution=self.execution, agent=self.agent, system=self.settings(), now=clock.now()
        )
        if isinstance(admitted, BudgetClosed):
            self._key_budget_stop(admitted)
            return False
        self.key_reserved = True
        return True

    def key_settle(self, outcome: TurnOutcome | None) -> None:
        """Settle the open key reservation with what the attempt spent (``outcome``
        None: unknown, charged at the estimate). No reservation, no query."""
        if not self.key_reserved:
            return
        self.key_reserved = False
        spent = None
        if outcome is not None:
            refusal = classify_refusal(error_code=outcome.error_code, detail=outcome.detail)
            spent = key_budgets.settled_cost(
                served=outcome.ok,
                cost_usd=Decimal(str(outcome.cost_usd)) if outcome.cost_usd is not None else None,
                unbilled=refusal.walks or refusal.error_code == "upstream_error",
            )
        settled = key_budgets.turn_key_settle(execution_id=self.execution.pk, spent=spent)
        if settled is not None:
            # The row's later full save must not write the open reservation back.
            self.execution.key_reservation = settled

    def _key_budget_closure(self, now: datetime) -> BudgetClosed | None:
        """The consumed budget that kept the key rung out of this walk, or None."""
        if self.legacy or (self.walk is not None and self.walk.key_tried):
            return None
        return pool.key_rung_state(agent=self.agent, system=self.settings(), now=now).budget

    def _key_budget_stop(self, closed: BudgetClosed) -> None:
        """Fail the turn whose key rung a consumed budget refused: ``billing``, walk_stop
        ``key_budget``, the budget in the detail, and the earliest instant anything
        could serve (a plan's known reset or the budget's new period)."""
        now = clock.now()
        walk = self.walk
        resets_at = closed.reopens_at
        known = None
        detail = f"{closed.reason[0].upper()}{closed.reason[1:]}; the key was not sent."
        if walk is not None and walk.trail:
            detail = f"{walk.trail_text()}; {closed.reason}, so the key was not sent."
            tried = [t.subscription_id for t in walk.trail if t.subscription_id is not None]
            known = earliest_known_reset(
                snapshots_read(tried).readings.values(),
                now=now,
                refusal_resets=[t.resets_at for t in walk.trail],
            )
            if known is not None:
                resets_at = min(resets_at, known)
        self.execution.walk_stop = Stop.KEY_BUDGET.value
        self.execution.resets_at = resets_at
        # An autonomous turn may wait for a plan's known reset (parking.py).
        until = parking.parks_until(
            execution=self.execution,
            agent=self.agent,
            resets_at=resets_at if known is not None else None,
            now=now,
        )
        if until is not None:
            self.execution.attempts = self.attempts
            parking.execution_park(
                execution=self.execution, agent=self.agent, until=until, detail=detail, now=now
            )
            return
        self._fail("billing", detail)

    # Before the first attempt

    def _pre_dispatch(self) -> tuple[Rung, Why] | None:
        """Route the first attempt elsewhere when the assignment is known not to serve,
        or is forecast to run out before the turn would end (then only to another plan
        that is not; with none the turn dispatches as assigned).

        Reads one cached snapshot (with its refusal mark and forecast), never probes, never raises,
        records nothing; spends the turn's single pre-dispatch remediation.
        """
        if self.origin is None:
            return None
        now = clock.now()
        try:
            evidence = turn_evidence_read(self.origin)
            # A plan forecast to run out mid-turn still serves now: only another plan
            # that is not running out too is worth the move, never the billed key.
            forecast_only = False
            if not pool.assigned_refusing(evidence, now=now, family=self._family()):
                if not self._forecast_exhausted(evidence, now=now):
                    return None
                forecast_only = True
            if self.switching_stop() is not None:
                return None
            walk = self._walk()
            pick = pre_dispatch_pick(
                walk,
                selection=self._selection(now),
                key_available=not forecast_only and self._key_available(now),
                now=now,
            )
            if forecast_only and pick is not None and self._forecast_exhausted_on(pick, now=now):
                pick = None
            rung = self._materialize(pick) if pick is not None else None
        except DatabaseError:
            # An optimisation must not fail a turn that could run: without the ranking
            # the turn dispatches as assigned and the walk still backs it up.
            logger.warning("turn %s: pre-dispatch check failed", self.execution.pk, exc_info=True)
            return None
        if pick is None or rung is None:
            return None
        self.routed = metrics.KEY if rung.kind is RungKind.API_KEY else metrics.PLAN
        logger.info(
            "turn %s: %s is %s; first attempt on %s",
            self.execution.pk,
            self._origin_name() or self.origin,
            "forecast to run out before the turn ends" if forecast_only else "known not to serve",
            rung.name,
        )
        return rung, Why.API_KEY if rung.kind is RungKind.API_KEY else Why.PRE_DISPATCH

    def _forecast_exhausted(self, evidence: TurnEvidence, *, now: datetime) -> bool:
        """Whether the assignment's stored forecast runs out before this turn would end."""
        return pool.assigned_forecast_exhausted(
            evidence,
            now=now,
            expected_turn=pool.forecast_turn_length(now=now, budget_end=self.budget_end),
            family=self._family(),
        )

    def _forecast_exhausted_on(self, pick: Pick, *, now: datetime) -> bool:
        """The same question for the plan a forecast would route to (one cache read)."""
        if pick.subscription_id is None:
            return False
        return pool.forecast_exhausted(
            pick.subscription_id,
            now=now,
            expected_turn=pool.forecast_turn_length(now=now, budget_end=self.budget_end),
            family=self._family(),
        )

    def _affinity(self) -> tuple[Rung, Why] | None:
        """Start a chat turn on the plan that served its session's previous turn, while
        that plan is eligible (``execution/affinity.py``). Only a turn with a session
        pays for it (one indexed query; a cache read when that plan is not the
        assignment); a database error only skips it.
        """
        session_id = self.execution.session_id
        if not session_id or self.origin is None:
            return None
        try:
            previous = affinity.session_previous_credential(
                agent=self.agent, session_id=session_id, before=self.execution.created_at
            )
            if previous is None:
                return None
            kind, subscription_id = previous
            target = policy.affinity_target(
                policy=self.agent.routing_policy,
                auto_switch=self.settings().auto_switch_subscriptions,
                assigned_id=self.origin,
                previous_kind=kind,
                previous_subscription_id=subscription_id,
            )
            if target is None:
                return None
            now = clock.now()
            rung = pool.affinity_rung(
                agent=self.agent,
                subscription_id=target,
                now=now,
                family=self._family(),
                expected_turn=pool.forecast_turn_length(now=now, budget_end=self.budget_end),
            )
        except DatabaseError:
            logger.warning("turn %s: affinity check failed", self.execution.pk, exc_info=True)
            return None
        if rung is None:
            return None
        self.rungs[target] = rung
        logger.info("turn %s: session stays on %s", self.execution.pk, rung.name)
        return rung, Why.AFFINITY

    def _policy_route(self) -> tuple[Rung, Why] | None:
        """The first attempt when the policy forbids the assignment: the best viable
        plan the policy allows (never the key), else None (the turn is refused)."""
        if self.origin is None or self.switching_stop() is not None:
            return None
        now = clock.now()
        pick = pre_dispatch_pick(
            self._walk(), selection=self._selection(now), key_available=False, now=now
        )
        rung = self._materialize(pick) if pick is not None else None
        if rung is None or rung.kind is not RungKind.SUBSCRIPTION:
            return None
        self.routed = metrics.PLAN
        return rung, Why.POLICY

    def _policy_refused(self, why: str) -> Execution:
        """Refuse a turn no credential the policy allows may serve: ``billing``, with the
        earliest known reset among the plans it allows (none when unknown)."""
        now = clock.now()
        selection = self.last_selection
        if selection is None and self.origin is not None:
            selection = self._selection(now)
        resets_at = None
        if selection is not None:
            # The refusing plans (dropped by the ranking) are the ones whose reset counts.
            allowed = [*selection.order(), *(c.subscription_id for c in selection.dropped)]
            resets_at = earliest_known_reset(
                snapshots_read(allowed).readings.values(),
                now=now,
                refusal_resets=[
                    c.last_failure_resets_at for c in (*selection.last_resort, *selection.dropped)
                ],
            )
        self.execution.walk_stop = Stop.POLICY.value
        self.execution.resets_at = resets_at
        detail = f"Agent {self.agent.name!r}: {why}, and no plan it allows can serve now."
        if resets_at is not None:
            detail += f" The earliest known reset is {resets_at.isoformat()}."
        # An autonomous turn may wait for that reset like an exhausted walk's (parking.py).
        until = parking.parks_until(
            execution=self.execution, agent=self.agent, resets_at=resets_at, now=now
        )
        if until is not None:
            self.execution.attempts = self.attempts
            return parking.execution_park(
                execution=self.execution, agent=self.agent, until=until, detail=detail, now=now
            )
        return self._fail("billing", detail)

    # After a refusal

    def _walk(self) -> Walk:
        if self.walk is None:
            self.walk = walk_start(
                origin=self.origin,
                autonomous=self.execution.autonomous,
                subscription_count=pool.subscription_count(self.agent.provider),
                deadline=self.budget_end,
            )
        return self.walk

    def _selection(self, now: datetime) -> Selection:
        selection = rank_alternatives(
            agent=self.agent,
            exclude_ids=[*self._walk().tried, *self._at_capacity_ids(now)],
            now=now,
            model=self.execution.model or None,
            strategy=self.settings().routing_strategy,  # already read: no second query
        )
        self.last_selection = selection
        return selection

    def _key_available(self, now: datetime) -> bool:
        if self.legacy:
            return False  # a restart-based key rung is what strands agents on the key
        return pool.key_rung_available(agent=self.agent, system=self.settings(), now=now)

    def _next(
        self, ran_on: Rung | None, why: Why, refusal: Refusal, outcome: TurnOutcome
    ) -> Pick | Stop:
        stop = walk_gate(refusal=refusal, origin=self.origin) or self.switching_stop()
        if stop is not None:
            return stop
        now = clock.now()
        walk = self._walk()
        walk.record(
            kind=ran_on.kind if ran_on else RungKind.SUBSCRIPTION,
            subscription_id=ran_on.subscription_id if ran_on else self.origin,
            name=ran_on.name if ran_on else "",
            why=why,
            served=False,
            reason=refusal.reason,
            resets_at=outcome.resets_at,
        )
        if self.legacy and self.legacy_restarts >= 1:
            return Stop.EXHAUSTED
        current_id, current_name = (
            Agent.objects.filter(pk=self.agent.pk)
            .values_list("subscription_id", "subscription__name")
            .get()
        )
        if (
            why is Why.AFFINITY
            and current_id == self.origin
            and self.origin not in walk.tried
            and may_reissue(walk.deadline, now=now)
        ):
            # The session's plan refused: the turn goes where it would have gone, its
            # assignment (which the ranking below leaves out).
            return Pick(RungKind.SUBSCRIPTION, self.origin, current_name or "", Why.ASSIGNED)
        return walk_next(
            walk,
            refusal=refusal,
            selection=self._selection(now),
            key_available=self._key_available(now),
            now=now,
            current_assignment=current_id,
            current_name=current_name or "",
        )

    def _materialize(self, pick: Pick) -> Rung | None:
        """The rung for ``pick``, with its secret; None when it has none any more."""
        if pick.kind is RungKind.API_KEY:
            return pool.key_rung(self.settings())
        assert pick.subscription_id is not None
        wanted = pick.subscription_id
        if wanted not in self.rungs:
            # The pick and the next few in rank order, in one query: decrypting every
            # ranked candidate's token (hundreds) for the one or two a walk tries was
            # most of a walked turn's CPU.
            order = self.last_selection.order() if self.last_selection is not None else []
            after = order[order.index(wanted) + 1 :] if wanted in order else []
            batch = [wanted, *(i for i in after if i not in self.rungs)][:RUNG_BATCH]
            self.rungs.update(pool.subscription_rungs(batch))
        return self.rungs.get(wanted)

    def _family(self) -> str | None:
        """The turn's model-family window (its model, else the agent's)."""
        return family_window(self.execution.model or self.agent.model or "")

    def _record_refusal(self, ran_on: Rung | None, refusal: Refusal, outcome: TurnOutcome) -> None:
        if refusal.failure_kind is None or ran_on is None:
            return
        record_rate_limit_event(
            agent_name=self.agent.name,
            agent_id=self.agent.pk,
            credential_kind=ran_on.kind.value,
            subscription_id=ran_on.subscription_id,
            error_message=outcome.detail,
            failure_kind=refusal.failure_kind,
            resets_at=outcome.resets_at,
            limiting_window=outcome.limiting_window,
            family=self._family(),
            throttle=refusal.throttle,
            now=clock.now(),
        )

    # Legacy agent servers (no override echo)

    def _enter_legacy(self) -> None:
        if not self.legacy:
            logger.warning(
                "agent %s does not echo the auth override: applying rungs by assignment",
                self.agent.name,
            )
        self.legacy = True

    def _reload_agent(self) -> Agent:
        self.agent = Agent.objects.select_related("subscription").get(pk=self.agent.pk)
        return self.agent

    def _apply_legacy(self, rung: Rung) -> bool:
        """Apply ``rung`` the old way: commit it as the assignment, then hot-reload.

        At most one rung may need a restart (a recreate kills the agent's other turns).
        """
        current = self.agent.subscription_id
        if (
            rung.kind is not RungKind.SUBSCRIPTION
            or rung.subscription_id is None
            or current is None
        ):
            return False
        self.legacy_committed = assignment_commit(
            agent=self.agent,
            expected_subscription_id=current,
            expected_subscription_name=self._origin_name(),
            subscription_id=rung.subscription_id,
            subscription_name=rung.name,
            why={"why": "legacy", "refused": "its subscription refused the turn"},
            now=clock.now(),
        )
        with self._agent_server_wait():
            reloaded = lifecycle.hot_reload_subscription_token(agent=self._reload_agent())
        if reloaded != "reloaded":
            self.legacy_restarts += 1
        self._reload_agent()
        return True

    # Finishing

    def _note_attempt(self, ran_on: Rung | None, why: Why, outcome: TurnOutcome) -> None:
        self.attempts.append(
            {
                "credential_kind": ran_on.kind.value if ran_on else "none",
                "subscription_id": ran_on.subscription_id if ran_on else None,
                "name": ran_on.name if ran_on else "",
                "fingerprint": ran_on.secret.fingerprint if ran_on else "",
                "why": why.value,
                "outcome": "served" if outcome.ok else "refused",
                "error_code": outcome.error_code,
                "status_code": outcome.status_code,
                "override_echo": outcome.override_echo,
                "legacy": self.legacy,
                "resets_at": outcome.resets_at.isoformat() if outcome.resets_at else None,
                "at": clock.now().isoformat(),
            }
        )

    def _served(self, ran_on: Rung | None, why: Why, outcome: TurnOutcome) -> Execution:
        now = clock.now()
        execution = self.execution
        switched = ran_on is not None and ran_on.key != (RungKind.SUBSCRIPTION, self.origin)
        # A plain served turn (its own plan, no notice due) writes one row: no BEGIN and
        # COMMIT round trips. A switch or a notice commits together with the row.
        plain = not switched and (
            ran_on is None
            or (ran_on.kind is RungKind.SUBSCRIPTION and self.agent.on_api_key_since is None)
        )
        with contextlib.nullcontext() if plain else transaction.atomic():
            execution.status = Status.SUCCEEDED
            execution.response = outcome.response
            execution.model = outcome.model or execution.model or self.agent.model
            execution.served_by_kind = ran_on.kind.value if ran_on else ""
            if switched or ran_on is None:
                execution.served_by_subscription_id = ran_on.subscription_id if ran_on else None
            else:
                # Its own plan, loaded with the agent: the answer names it without a query.
                execution.served_by_subscription = self.agent.subscription
            execution.input_tokens = outcome.input_tokens
            execution.output_tokens = outcome.output_tokens
            if outcome.cost_usd is not None:
                execution.cost_usd = Decimal(str(outcome.cost_usd))
            execution.attempts = self.attempts
            execution.finished_at = now
            # A session kept on its plan commits nothing: sessions of one agent on two
            # plans would flip its assignment back and forth.
            if switched and ran_on is not None and why not in (Why.AFFINITY, Why.AT_CAPACITY):
                execution.subscription_switch = self._switch(ran_on, why, now)
            execution.save(update_fields=SERVED_FIELDS)
            if ran_on is not None:
                self._notices(ran_on, why, now)
        if (
            outcome.upstream_ratelimit
            and ran_on is not None
            and ran_on.kind is RungKind.SUBSCRIPTION
            and ran_on.subscription_id is not None
        ):
            # The headers of the plan that was sent: a fresh reading for one cache write.
            headroom_reading_observe(
                subscription_id=ran_on.subscription_id, headers=outcome.upstream_ratelimit, now=now
            )
        logger.info("turn %s on %s: served by %s", execution.pk, self.agent.name, ran_on)
        return execution

    def _switch(self, ran_on: Rung, why: Why, now: datetime) -> dict[str, Any]:
        reason = self._why(ran_on, why)
        origin_name = self._origin_name()
        switch = {
            **switch_record(
                from_id=self.origin,
                from_name=origin_name,
                to_id=ran_on.subscription_id,
                to_name=ran_on.name,
                why=reason,
                now=now,
            ),
            "kind": ran_on.kind.value,
            "attempts": len(self.attempts),
            # A legacy walk committed each rung as it applied it.
            "committed": self.legacy_committed,
        }
        if (
            ran_on.kind is RungKind.SUBSCRIPTION
            and ran_on.subscription_id is not None
            and self.origin is not None
            and not self.legacy
        ):
            switch["committed"] = assignment_commit(
                agent=self.agent,
                expected_subscription_id=self.origin,
                expected_subscription_name=origin_name,
                subscription_id=ran_on.subscription_id,
                subscription_name=ran_on.name,
                why=reason,
                now=now,
            )
        return switch

    def _origin_name(self) -> str | None:
        """The agent's assigned subscription's name, as loaded with the agent."""
        return self.agent.subscription.name if self.agent.subscription else None

    def _why(self, ran_on: Rung, why: Why) -> dict[str, Any]:
        """The served rung's reason: how it was chosen and what refused before it."""
        refused = [a for a in self.attempts if a["outcome"] == "refused"]
        reason: dict[str, Any] = {
            "why": why.value,
            "refused": (
                "; ".join(f"{a['name'] or 'platform API key'} refused" for a in refused)
                or (
                    "its routing policy does not allow its subscription"
                    if why is Why.POLICY
                    else "its subscription was known not to serve"
                )
            ),
        }
        if self.walk is not None and ran_on.subscription_id is not None:
            # The ranking's own explanation for the chosen subscription, when it ranked.
            selection = self.last_selection
            if selection is not None:
                for ranked in selection.ranked:
                    if ranked.candidate.subscription_id == ran_on.subscription_id:
                        reason.update(selection.reason(ranked))
                        break
        return reason

    def _notices(self, ran_on: Rung, why: Why, now: datetime) -> None:
        agent = self.agent
        if ran_on.kind is RungKind.API_KEY:
            if why is Why.API_KEY and agent.on_api_key_since is None:
                # Since this turn started: "Back on subscription" counts it among the
                # turns the key served.
                started = self.execution.created_at
                if Agent.objects.filter(pk=agent.pk, on_api_key_since__isnull=True).update(
                    on_api_key_since=started
                ):
                    agent.on_api_key_since = started
                notification_send(
                    kind="api_key_route",
                    level="warning",
                    title="Now billing the platform API key",
                    body=f"Agent {agent.name!r}: every subscription refused; the turn ran on "
                    "the platform API key, billed per token.",
                    agent_name=agent.name,
                    agent_id=agent.pk,
                    dedup_key=f"api-key-route:{agent.pk}",
                    dedup_ttl=KEY_NOTICE_TTL,
                    data={"agent": agent.name},
                    now=now,
                )
            return
        since = agent.on_api_key_since
        if since is None:
            return
        cleared = Agent.objects.filter(pk=agent.pk, on_api_key_since=since).update(
            on_api_key_since=None
        )
        if cleared != 1:
            return  # a concurrent turn already said it
        spent = Execution.objects.filter(
            agent=agent,
            served_by_kind=RungKind.API_KEY,
            status=Status.SUCCEEDED,
            created_at__gte=since,
        ).aggregate(turns=Count("pk"), usd=Sum("cost_usd"))
        usd = float(spent["usd"] or 0)
        notification_send(
            kind="subscription_return",
            title=f"Back on subscription {ran_on.name!r}",
            body=f"Agent {agent.name!r} is served by a plan again; meanwhile "
            f"{spent['turns']} turn(s) ran on the platform API key for ${usd:.4f}.",
            agent_name=agent.name,
            agent_id=agent.pk,
            subscription_id=ran_on.subscription_id,
            data={"turns_on_key": spent["turns"], "key_usd": usd, "since": since.isoformat()},
            now=now,
        )

    def _refused(self, refusal: Refusal, outcome: TurnOutcome, stop: Stop) -> Execution:
        now = clock.now()
        execution = self.execution
        walk = self.walk
        # A quota or credit refusal that ends the turn is billing; the rest keep theirs.
        error_code = "billing" if refusal.quota else refusal.error_code
        detail = outcome.detail
        resets_at = outcome.resets_at if outcome.resets_at and outcome.resets_at > now else None
        if walk is not None and walk.trail and stop in EXHAUSTED_STOPS:
            ended = self._exhausted(walk, stop, now)
            if isinstance(ended, Execution):
                return ended
            error_code, detail, resets_at, stop = ended
        elif walk is not None and walk.trail and stop is Stop.BUDGET:
            detail = f"{walk.trail_text()}; the turn's time budget ran out before another try."
        execution.walk_stop = stop.value if refusal.walks else ""
        execution.resets_at = resets_at
        return self._fail(error_code, detail)

    def _exhausted(
        self, walk: Walk, stop: Stop, now: datetime
    ) -> Execution | tuple[str, str, datetime | None, Stop]:
        """A walk that tried every candidate: the parked Execution (an autonomous turn
        that may wait for a known plan reset), else the failure's error code, detail,
        earliest known reset and stop, with the operator told once."""
        execution = self.execution
        # Quota or credit anywhere on the trail is billing; only dead credentials
        # everywhere is auth (no reset will bring those back).
        quota = any(t.reason in QUOTA_REASONS for t in walk.trail)
        error_code = "billing" if quota else "auth"
        self.exhausted = True
        detail = f"{walk.trail_text()}; every candidate refused."
        if not policy.key_allowed(self.agent.routing_policy):
            detail += " Its routing policy (subscription-only) never uses the platform API key."
        tried = [t.subscription_id for t in walk.trail if t.subscription_id is not None]
        resets_at = earliest_known_reset(
            snapshots_read(tried).readings.values(),
            now=now,
            refusal_resets=[t.resets_at for t in walk.trail],
        )
        plan_reset = resets_at
        closed = self._key_budget_closure(now)
        if closed is not None:
            # The key would have been the next rung: say which budget kept it out.
            stop = Stop.KEY_BUDGET
            detail = f"{walk.trail_text()}; every plan refused and {closed.reason}."
            resets_at = min(resets_at or closed.reopens_at, closed.reopens_at)
            key_budget_notify(closed=closed, agent=self.agent, now=now)
        # Nobody waits for an autonomous turn: it may wait for the reset instead of
        # failing (never for dead credentials only: no reset brings those back).
        # A closed key budget alone is no reset to wait for: a plan's must be known.
        until = parking.parks_until(
            execution=execution,
            agent=self.agent,
            resets_at=resets_at if plan_reset is not None else None,
            now=now,
        )
        if quota and until is not None:
            execution.walk_stop = stop.value
            execution.attempts = self.attempts
            return parking.execution_park(
                execution=execution, agent=self.agent, until=until, detail=detail, now=now
            )
        self._notify_exhausted(detail, resets_at, now)
        return error_code, detail, resets_at, stop

    def _notify_exhausted(self, detail: str, resets_at: datetime | None, now: datetime) -> None:
        notification_send(
            kind="pool_exhausted",
            level="critical",
            title="No credential could serve a turn",
            body=f"Agent {self.agent.name!r}: {detail}"
            + (f" The earliest known reset is {resets_at.isoformat()}." if resets_at else ""),
            agent_name=self.agent.name,
            agent_id=self.agent.pk,
            dedup_key=f"pool-exhausted:{self.agent.pk}",
            dedup_ttl=EXHAUSTED_NOTICE_TTL,
            data={
                "trail": self.attempts_public(),
                "earliest_reset": resets_at.isoformat() if resets_at else None,
            },
            now=now,
        )

    def attempts_public(self) -> list[dict[str, Any]]:
        return [
            {k: a[k] for k in ("credential_kind", "name", "why", "outcome", "error_code")}
            for a in self.attempts
        ]

    def _fail(self, error_code: str, detail: str) -> Execution:
        self.execution.attempts = self.attempts
        return _finish_failed(self.execution, error_code=error_code, detail=detail)


def _finish_after_database_loss(execution: Execution) -> Execution:
    """Record a turn whose database connection died under it (a restart, a failover).

    Django health-checks a persistent connection only when a request or a task starts,
    so one the database dropped mid-turn stays dead for the rest of it: every write,
    the failure's own included, would raise and leave the row ``running`` until the
    reaper. So drop it and write on a fresh one. A plain served turn keeps what it
    served; anything else fails ``worker_lost`` (its outcome is unknown: a switch's
    commit may have been rolled back with the lost transaction). If the database is
    still down this raises, and the reaper remains the backstop.
    """
    logger.warning(
        "turn %s: the database connection was lost; finishing the row on a new one",
        execution.pk,
        exc_info=True,
    )
    connection.close()
    if execution.status == Status.SUCCEEDED and not execution.subscription_switch:
        execution.save()
        return execution
    return _finish_failed(
        execution,
        error_code="worker_lost",
        detail="the database connection was lost while the turn ran; its outcome could not "
        "be recorded",
    )


def _finish_failed(execution: Execution, *, error_code: str, detail: str) -> Execution:
    execution.status = Status.FAILED
    execution.error_code = error_code
    execution.error_detail = redact(detail)[:ERROR_DETAIL_MAX]
    execution.finished_at = clock.now()
    execution.save()
    logger.info("turn %s on %s: failed %s", execution.pk, execution.agent_name, error_code)
    return execution


def execution_enqueue(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
    schedule: Schedule | None = None,
) -> Execution:
    """Create a queued turn and hand it to a worker once the row is committed.

    Admission (``execution_admit``) runs once the row is committed, before the hand
    over. A refused turn with a caller raises TooManyTurns (no row left); one a
    schedule fired has no caller to answer, so it is recorded as a failed turn
    (``too_many_turns``) of its schedule instead of being lost.
    """
    with transaction.atomic():
        execution = execution_create(
            agent=agent,
            message=message,
            trigger=trigger,
            model=model,
            timeout_seconds=timeout_seconds,
            queued=True,
            schedule=schedule,
        )
        transaction.on_commit(lambda: _queued_turn_hand_over(execution))
    return execution


def _queued_turn_hand_over(execution: Execution) -> None:
    from execution import tasks  # the task module imports this one

    try:
        execution_admit(execution=execution, record_refusal=execution.schedule_id is not None)
    except TooManyTurns as exc:
        if execution.schedule_id is None:
            raise
        logger.warning("turn %s of a schedule refused: %s", execution.pk, exc.message)
        return
    tasks.run_turn.delay(str(execution.pk))


def execution_run_queued(*, execution_id: str) -> str:
    """Run a queued turn (the worker's side); idempotent by execution id.

    Returns what happened: ``ran``, or ``not_queued`` for a redelivered task whose
    turn already started or finished (it is never dispatched twice).
    """
    with log_context(execution_id=execution_id):
        execution = execution_claim(execution_id=execution_id, now=clock.now())
        if execution is None:
            return "not_queued"
        if execution.agent is None:
            _finish_failed(execution, error_code="container_fault", detail="the agent was deleted")
            metrics.turns_failed_outside_the_loop(error_code="container_fault")
            return "ran"
        execution_dispatch(execution=execution, agent=execution.agent)
        return "ran"


def notifications_mark_read(
    *, user: AbstractBaseUser | AnonymousUser, ids: list[int] | None, now: datetime
) -> int:
    """Mark the caller's visible unread notifications read (``ids``, or all); returns how many."""
    queryset = notifications_visible_to(user).filter(read_at__isnull=True)
    if ids is not None:
        queryset = queryset.filter(pk__in=ids)
    return Notification.objects.filter(pk__in=queryset.values("pk")).update(read_at=now)


def executions_reap(*, now: datetime) -> int:
    """Fail turns left ``running`` or ``queued`` past their deadline (``worker_lost``).

    A turn whose outcome is unknown is failed, never re-run blind: it may have been
    served and billed. Returns how many rows were failed.
    """
    lost = Execution.objects.filter(status__in=[Status.RUNNING, Status.QUEUED], deadline__lt=now)
    # Their key reservations are settled once, after the rows are failed (a worker that
    # is still finishing one settles it first, and this then settles nothing).
    reserved = list(lost.filter(key_reservation__settled=False).values_list("pk", flat=True))
    reaped = lost.update(
        status=Status.FAILED,
        error_code="worker_lost",
        error_detail="the process running this turn was lost before it finished",
        finished_at=now,
    )
    key_budgets.turns_key_release_lost(execution_ids=reserved)
    metrics.turns_failed_outside_the_loop(error_code="worker_lost", count=reaped)
    return reaped
