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
from agents.models import Agent, ProcessState
from agents.rung import Rung, RungKind
from execution.models import Execution, Schedule, Status
from execution.selectors import notifications_visible_to
from subscriptions import pool
from subscriptions.classifier import QUOTA_REASONS, Refusal, classify_refusal
from subscriptions.headroom.rules import Selection, earliest_known_reset
from subscriptions.headroom.selection import rank_alternatives
from subscriptions.headroom.store import snapshots_read, turn_evidence_read
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
    """
    execution = execution_create(
        agent=agent,
        message=message,
        trigger=trigger,
        model=model,
        timeout_seconds=timeout_seconds,
        session_id=session_id,
    )
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
        self.origin = agent.subscription_id
        rung = lifecycle.baseline_rung(agent)
        why = Why.ASSIGNED
        routed = self._pre_dispatch()
        if routed is not None:
            rung, why = routed
        retrying = False
        while True:
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
            refusal = classify_refusal(error_code=outcome.error_code, detail=outcome.detail)
            retrying = self._retries(refusal)
            if retrying:
                continue  # the same rung, as chosen: nothing is recorded or walked
            # Recorded as it happens, against what was sent, before auto-switch is read:
            # concurrent turns see it, and an operator with auto-switch off still does.
            self._record_refusal(ran_on, refusal, outcome)
            step = self._next(ran_on, why, refusal, outcome)
            if not isinstance(step, Pick):
                return self._refused(refusal, outcome, step)
            next_rung = self._materialize(step)
            if next_rung is None:
                return self._refused(refusal, outcome, Stop.EXHAUSTED)
            if self.legacy and not self._apply_legacy(next_rung):
                return self._refused(refusal, outcome, Stop.EXHAUSTED)
            rung, why = next_rung, step.why

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
        try:
            with self._agent_server_wait():
                return lifecycle.client_for(self.agent).run_turn(
                    execution_id=str(self.execution.pk),
                    message=self.execution.message,
                    timeout_seconds=remaining,
                    model=self.execution.model or self.agent.model or None,
                    rung=None if self.legacy else rung,
                    session_id=self.execution.session_id or None,
                )
        except AgentServerUnavailable as exc:
            self._fail("container_fault", str(exc))
            return None

    # Before the first attempt

    def _pre_dispatch(self) -> tuple[Rung, Why] | None:
        """Route the first attempt elsewhere when the assignment is known not to serve.

        Reads one cached snapshot (with its refusal mark), never probes, never raises,
        records nothing; spends the turn's single pre-dispatch remediation.
        """
        if self.origin is None:
            return None
        now = clock.now()
        try:
            if not pool.assigned_refusing(turn_evidence_read(self.origin), now=now):
                return None
            if self.switching_stop() is not None:
                return None
            walk = self._walk()
            pick = pre_dispatch_pick(
                walk,
                selection=self._selection(now),
                key_available=self._key_available(now),
                now=now,
            )
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
            "turn %s: %s is known not to serve; first attempt on %s",
            self.execution.pk,
            self._origin_name() or self.origin,
            rung.name,
        )
        return rung, Why.API_KEY if rung.kind is RungKind.API_KEY else Why.PRE_DISPATCH

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
        selection = rank_alternatives(agent=self.agent, exclude_ids=self._walk().tried, now=now)
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

    def _record_refusal(self, ran_on: Rung | None, refusal: Refusal, outcome: TurnOutcome) -> None:
        if refusal.failure_kind is None or ran_on is None:
            return
        record_rate_limit_event(
            agent_name=self.agent.name,
            credential_kind=ran_on.kind.value,
            subscription_id=ran_on.subscription_id,
            error_message=outcome.detail,
            failure_kind=refusal.failure_kind,
            resets_at=outcome.resets_at,
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
            if switched and ran_on is not None:
                execution.subscription_switch = self._switch(ran_on, why, now)
            execution.save(update_fields=SERVED_FIELDS)
            if ran_on is not None:
                self._notices(ran_on, why, now)
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
                or "its subscription was known not to serve"
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
            # Quota or credit anywhere on the trail is billing; only dead credentials
            # everywhere is auth (no reset will bring those back).
            quota = any(t.reason in QUOTA_REASONS for t in walk.trail)
            error_code = "billing" if quota else "auth"
            self.exhausted = True
            detail = f"{walk.trail_text()}; every candidate refused."
            tried = [t.subscription_id for t in walk.trail if t.subscription_id is not None]
            resets_at = earliest_known_reset(
                snapshots_read(tried).readings.values(),
                now=now,
                refusal_resets=[t.resets_at for t in walk.trail],
            )
            notification_send(
                kind="pool_exhausted",
                level="critical",
                title="No credential could serve a turn",
                body=f"Agent {self.agent.name!r}: {detail}"
                + (f" The earliest known reset is {resets_at.isoformat()}." if resets_at else ""),
                agent_name=self.agent.name,
                dedup_key=f"pool-exhausted:{self.agent.pk}",
                dedup_ttl=EXHAUSTED_NOTICE_TTL,
                data={
                    "trail": self.attempts_public(),
                    "earliest_reset": resets_at.isoformat() if resets_at else None,
                },
                now=now,
            )
        elif walk is not None and walk.trail and stop is Stop.BUDGET:
            detail = f"{walk.trail_text()}; the turn's time budget ran out before another try."
        execution.walk_stop = stop.value if refusal.walks else ""
        execution.resets_at = resets_at
        return self._fail(error_code, detail)

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
    """Create a queued turn and hand it to a worker once the row is committed."""
    from execution import tasks  # the task module imports this one

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
        execution_id = str(execution.pk)
        transaction.on_commit(lambda: tasks.run_turn.delay(execution_id))
    return execution


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
    reaped = Execution.objects.filter(
        status__in=[Status.RUNNING, Status.QUEUED], deadline__lt=now
    ).update(
        status=Status.FAILED,
        error_code="worker_lost",
        error_detail="the process running this turn was lost before it finished",
        finished_at=now,
    )
    metrics.turns_failed_outside_the_loop(error_code="worker_lost", count=reaped)
    return reaped
