"""This project's policy in the fleet benchmark: the turn planner itself
(``routing/planner``), fed from memory.

``ProjectTurn`` is ``execution/turn.py``'s loop with an in-memory evidence source: it
asks ``plan`` for the next action, answers each ``Need`` from ``MemoryPool`` and the
policy's stored readings and forecasts, applies each ``Send`` through the simulated
world, and ends on ``Finish``, ``Park`` or ``Fail``. The order of a turn and every rule
(pre-dispatch and the forecast, affinity, the policy gates, the key rung, the walk,
parking, the turn's model family) are therefore the product's by construction; this
module decides nothing.

What the world cannot produce is answered as production would answer it then: the
world has no provider outage (the breaker stays closed), no concurrency caps, no key
budgets, no chat sessions (affinity finds no previous credential) and agents that wait
for nothing (the default wait policy ``fail``: no turn parks; a ``Park`` would be
counted unserved).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings

from bench.fleet.memory import MemoryPool
from bench.fleet.policies import Policy, TurnResult, TurnRun
from bench.fleet.trace import PROVIDER, Trace, Turn
from bench.fleet.week import WeekPlanner
from bench.fleet.world import World
from execution.deadlines import turn_timeout
from execution.finishing import EXHAUSTED_NOTICE_TTL
from execution.served import KEY_NOTICE_TTL
from routing.eligibility import Admission, Admitted, Excluded, PlanFacts, Role, forbidden
from routing.headroom.exhaustion_forecast import (
    LOOKBACK,
    Forecast,
    UsagePoint,
    forecast_compute,
)
from routing.headroom.placement import placement_pick, settled
from routing.headroom.probe_cadence import probe_due
from routing.headroom.ranking import BALANCED, BANDED
from routing.headroom.reading import Reading
from routing.headroom.rebalance_plan import rebalance_plan
from routing.headroom.windows import family_window
from routing.planner import (
    KEY_RUNG,
    Action,
    AgentFacts,
    Ask,
    Attempt,
    Current,
    Evidence,
    Fail,
    Finish,
    KeyState,
    Legacy,
    Need,
    Notice,
    Outcome,
    Park,
    Record,
    RungRef,
    Send,
    SettingsFacts,
    TurnFacts,
    plan,
)
from routing.rung import Rung, RungKind
from subscriptions.plan_facts import fresh_for, with_settings

# A turn never takes more steps than this (the planner ends every turn far sooner).
MAX_STEPS = 500


class ProjectPolicy(Policy):
    """This project's policy: the planner over ``MemoryPool``.

    The fleet runs with auto-switch and the key fallback on, no agent pinned, every
    agent a thrifty Claude runtime that may bill the key, and agent servers that echo
    the override (so no legacy path). Turns overlap, so a turn's compare-and-set can
    lose to another turn of the same agent that committed first; it then commits
    nothing and says nothing, as ``execution/served.py`` does.
    """

    name = "this project"
    uses_readings = True
    # ``SystemSettings.routing_strategy``: how a walk and pre-dispatch rank.
    strategy = BALANCED
    # Whether the sweep also rebalances (``assignments_rebalance``; balanced only).
    rebalances = False
    # Whether placement may look at an agent (``placement_look.placement_due``); off, the row
    # shows what placement buys.
    places = True
    # Whether the planning task runs (``bench.fleet.week``): off, turns find no week
    # plan and keep today's placement rules.
    plans_week = True

    def __init__(self, trace: Trace, world: World) -> None:
        super().__init__(trace, world)
        self.pool = MemoryPool(world, self.assignment, strategy=self.strategy)
        self.on_api_key_since: dict[str, datetime | None] = {
            a.name: None for a in trace.fleet.agents
        }
        self.interval = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
        self.limited_interval = timedelta(seconds=settings.TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS)
        self.budget = timedelta(seconds=turn_timeout(None))
        self.history: dict[int, dict[str, list[UsagePoint]]] = {}
        self.forecasts: dict[int, Forecast | _Pending] = {}
        self.week = WeekPlanner(trace, world) if self.plans_week else None

    def sweep(self, now: datetime) -> None:
        """``headroom_sweep``: probe each due subscription, store what it read and the
        forecast computed from its history, as the sampler does."""
        readings = {}
        for pk in self.world.present_ids(now):
            if probe_due(
                self.pool.snapshots.get(pk),
                now=now,
                interval=self.interval,
                limited_interval=self.limited_interval,
                last_failure_at=self.pool.last_failure_at(pk, now),
            ):
                readings[pk] = self.world.reading(pk, now)
        self.pool.readings_record(readings)
        self._forecasts_update(readings, now)
        if self.week is not None:
            self.week.observe(readings)
        if self.rebalances:
            self._rebalance(now)
        if self.week is not None and self.week.due(now):
            self.week.solve(now, self.pool.snapshots, self.assignment, self.pool.moved)

    def _forecasts_update(self, readings: dict[int, Reading], now: datetime) -> None:
        """``headroom_forecasts_update``: the history point, then the forecast."""
        for pk, reading in readings.items():
            if not reading.answered:
                continue
            windows = self.history.setdefault(pk, {})
            for name, window in reading.windows.items():
                if window.utilization is None:
                    continue
                points = windows.setdefault(name, [])
                points.append(UsagePoint(reading.fetched_at, float(window.utilization)))
                while points and points[0].at < now - LOOKBACK:
                    points.pop(0)
            # Computed when first asked for (the same inputs give the same forecast):
            # most are replaced by the next reading before any turn reads them.
            self.forecasts[pk] = _Pending(
                windows, {name: w.resets_at for name, w in reading.windows.items()}, reading
            )

    def forecast_of(self, pk: int, now: datetime) -> Forecast | None:
        """The stored forecast, while it is evidence (as long as its reading)."""
        held = self.forecasts.get(pk)
        if isinstance(held, _Pending):
            held = self.forecasts[pk] = held.compute()
        if held is None or now - held.computed_at > fresh_for():
            return None
        return held

    def _rebalance(self, now: datetime) -> None:
        """``assignments_rebalance`` after the sweep: the hysteresis's moves, each a
        compare-and-set with one notification."""
        agents = [
            (a.name, current, family_window(a.model))
            for a in self.trace.fleet.agents
            if (current := self.assignment[a.name]) is not None
        ]
        candidates = self.pool.candidates(now)
        for move in rebalance_plan(
            agents,
            candidates,
            self.pool.snapshots,
            now=now,
            max_age=fresh_for(),
            provider=PROVIDER,
        ):
            self.pool.commit(
                agent=str(move.agent),
                expected=move.from_id,
                subscription_id=move.to.candidate.subscription_id,
                now=now,
            )

    def run_turn(self, turn: Turn, now: datetime) -> TurnRun:
        if self.week is not None:
            self.week.turn_started(turn.agent, now, turn.tokens)
        return ProjectTurn(self, turn, now).run()

    @property
    def sent(self) -> int:
        return self.pool.notifications


@dataclass(frozen=True)
class _Pending:
    """A forecast not computed yet: its plan's history as of ``reading``. The history
    lists change only when the plan's next reading replaces this."""

    windows: dict[str, list[UsagePoint]]
    resets: dict[str, datetime | None]
    reading: Reading

    def compute(self) -> Forecast:
        return forecast_compute(self.windows, resets=self.resets, now=self.reading.fetched_at)


class RulesProjectPolicy(ProjectPolicy):
    """This project's policy without the week plan: today's placement rules alone (the
    product before the planning task); the difference is what the plan buys."""

    name = "this project (today's rules)"
    plans_week = False


class BandedProjectPolicy(ProjectPolicy):
    """This project's rules with ``routing_strategy`` banded (the earlier default)."""

    name = "this project (banded)"
    strategy = BANDED
    plans_week = False


class UnplacedProjectPolicy(ProjectPolicy):
    """This project's policy without placement: agents move only when a turn is
    refused or forecast to run out (the product before placement); the difference
    between this row and the project's is what placement buys."""

    name = "this project (no placement)"
    places = False
    plans_week = False


class RebalancingProjectPolicy(ProjectPolicy):
    """The balanced order plus the sweep's proactive rebalancing
    (``TRINITY_REBALANCE``, off by default): what the moves add is the difference
    between this row and the project's."""

    name = "this project (balanced + rebalance)"
    rebalances = True
    plans_week = False


class ProjectTurn:
    """One turn: ``execution/turn.py``'s loop on the planner, answered from memory.

    ``now`` is the turn's clock: each ``Send`` runs the turn's remaining requests at
    their instants (``Policy._try``), so a refusal in the middle of the turn reaches
    the planner at that request's instant, and the walk resumes the turn from there.
    """

    def __init__(self, policy: ProjectPolicy, turn: Turn, now: datetime) -> None:
        self.policy = policy
        self.pool = policy.pool
        self.world = policy.world
        self.turn = turn
        self.now = now
        self.agent = turn.agent
        self.family = family_window(policy.trace.model_of(turn))
        self.result = TurnResult.of(turn, now)

    def run(self) -> TurnRun:
        evidence = Evidence(
            turn=with_settings(
                TurnFacts(
                    provider=PROVIDER,
                    autonomous=self.turn.autonomous,
                    created_at=self.now,
                    budget_end=self.now + self.policy.budget,
                    family=self.family,
                )
            )
        )
        for _ in range(MAX_STEPS):
            action: Action = plan(evidence, now=self.now)
            if isinstance(action, Need):
                evidence = self._answer(evidence, action)
            elif isinstance(action, Send):
                evidence = yield from self._send(evidence, action)
            elif isinstance(action, Record):
                self._record(evidence, action)
                evidence = evidence.learn(recorded=True)
            else:
                self._end(evidence, action)
                return self.result
        raise RuntimeError(f"the planner did not end a turn of {self.agent}")

    # Evidence

    def _answer(self, evidence: Evidence, need: Need) -> Evidence:
        ask = need.ask
        if ask is Ask.BREAKER:
            return replace(evidence, admitted=True)  # no provider outage in the world
        if ask is Ask.READY:
            origin = self.policy.assignment[self.agent]
            agent = self._agent(origin)
            assigned = None
            if origin is not None:
                # A rule that forbids the assignment is known from its row.
                candidate = self.pool.plan_facts(origin, self.now).candidate
                assigned = forbidden(candidate, agent, evidence.turn, now=self.now)
            legacy = Legacy(assignment=origin)
            return replace(evidence, ready="", agent=agent, legacy=legacy, assigned=assigned)
        if ask is Ask.SETTINGS:
            return replace(evidence, settings=SettingsFacts(True, True, None))
        if ask is Ask.ASSIGNED:
            return replace(evidence, assigned=self._assigned(evidence))
        if ask is Ask.AFFINITY:
            return replace(evidence, previous=None)  # the traces carry no chat sessions
        if ask is Ask.PLANNED:
            week = self.policy.week
            return replace(evidence, planned=week.entry(self.agent) if week is not None else None)
        if ask is Ask.POOL_SIZE:
            return replace(evidence, pool_size=len(self.world.present_ids(self.now)))
        if ask is Ask.RUNGS:
            names = {pk: self.world.subscriptions[pk].name for pk in need.ids}
            return replace(evidence, rungs={**evidence.rungs, **names})
        return self._step_fact(evidence, need)

    def _step_fact(self, evidence: Evidence, need: Need) -> Evidence:
        ask, now = need.ask, self.now
        if ask is Ask.SELECTION:
            admission = self._admission(evidence, tried=frozenset(need.ids))
            return evidence.learn(selection=self.pool.selection(admission))
        if ask is Ask.KEY:
            return evidence.learn(key=KeyState(self.pool.key_rung_available(now)))
        if ask is Ask.CURRENT:
            current = self.policy.assignment[self.agent]
            name = self.world.subscriptions[current].name if current is not None else ""
            return evidence.learn(current=Current(current, name))
        if ask is Ask.FORECAST:
            pk = need.ids[0]
            out = {**evidence.facts.forecast_out, pk: self._forecast_out(evidence, pk)}
            return evidence.learn(forecast_out=out)
        if ask is Ask.READINGS:
            snapshots = self.pool.snapshots
            return evidence.learn(
                readings={pk: snapshots[pk] for pk in need.ids if pk in snapshots}
            )
        if ask is Ask.PLACEMENT_DUE:
            due = self.policy.places and self.pool.placement_due(self.agent, self.now)
            return evidence.learn(placement_due=due)
        if ask is Ask.PLACEMENT:
            return evidence.learn(placement=self._placement(need.ids))
        if ask is Ask.BREAKER_FAILURE:
            return evidence.learn(breaker_after=False)
        if ask is Ask.BREAKER_OPEN:
            return evidence.learn(breaker_open=False)
        raise RuntimeError(f"the fleet cannot answer {need}")  # affinity needs a session

    def _agent(self, origin: int | None) -> AgentFacts:
        baseline = KEY_RUNG if origin is None else self._ref(origin)
        moved = self.pool.moved.get(self.agent)
        return AgentFacts(
            name=self.agent,
            origin=origin,
            baseline=baseline,
            routing_policy="thrifty",
            on_api_key=self.policy.on_api_key_since[self.agent] is not None,
            moved_at=moved[0] if moved is not None else None,
            moved_from=moved[1]
            if moved is not None and not settled(moved[0], now=self.now)
            else None,
        )

    def _admission(self, evidence: Evidence, **out: frozenset[int]) -> Admission:
        """What ``admit`` reads of this turn and its agent now."""
        assert evidence.agent is not None
        return Admission.of(evidence.agent, evidence.turn, now=self.now, **out)

    def _assigned(self, evidence: Evidence) -> Admitted | Excluded:
        """``execution/gathering.py``'s verdict on the assignment: ``admit`` on its facts."""
        origin = evidence.agent.origin if evidence.agent is not None else None
        assert origin is not None  # the planner asks only with an assignment
        forecast = self.policy.forecast_of(origin, self.now)
        facts = self.pool.plan_facts(origin, self.now, forecast=forecast)
        return self._admission(evidence).judge(facts, Role.ASSIGNED)

    def _forecast_out(self, evidence: Evidence, pk: int) -> bool:
        """Whether the plan a forecast would route to runs out as well (``admit`` on its
        ranked row, its snapshot and its forecast, as ``execution/gathering.py`` asks)."""
        selection = evidence.last_selection
        ranked = selection.ranked if selection is not None else ()
        candidate = next(r.candidate for r in ranked if r.candidate.subscription_id == pk)
        facts = PlanFacts(
            candidate, self.pool.snapshots.get(pk), self.policy.forecast_of(pk, self.now)
        )
        verdict = self._admission(evidence).judge(facts, Role.ALTERNATIVE)
        return not isinstance(verdict, Admitted) or verdict.forecast_out

    def _placement(self, ids: tuple[int, ...]) -> int | None:
        origin = self.policy.assignment[self.agent]
        snapshots = self.pool.snapshots
        return placement_pick(
            snapshots.get(origin) if origin is not None else None,
            ((pk, snapshots.get(pk)) for pk in ids),
            now=self.now,
            max_age=fresh_for(),
            family=self.family,
        )

    # Actions

    def _ref(self, pk: int) -> RungRef:
        return RungRef(RungKind.SUBSCRIPTION, pk, self.world.subscriptions[pk].name)

    def _rung(self, ref: RungRef | None, evidence: Evidence) -> Rung:
        if ref is None:
            ref = evidence.agent.baseline if evidence.agent is not None else None
        if ref is None or ref.kind is RungKind.API_KEY:
            return self.world.key_rung
        assert ref.subscription_id is not None
        return self.world.subscriptions[ref.subscription_id].rung

    def _send(self, evidence: Evidence, send: Send) -> Generator[datetime, None, Evidence]:
        pk = send.rung.subscription_id if send.rung is not None else None
        # The planner never starts a turn on a plan an admin paused, nor walks to one.
        assert pk is None or not self.world.paused(pk, self.now), f"sent to paused {pk}"
        before = len(self.result.served)
        outcome = yield from self.policy._try(
            self.result, self._rung(send.rung, evidence), self.turn
        )
        self.now = self.result.now
        week = self.policy.week
        if week is not None and pk is not None:
            for served in self.result.served[before:]:
                week.served(pk, served.at, self.turn.parts[served.request].tokens)
        seen = Outcome(
            outcome.ok,
            outcome.error_code,
            outcome.detail,
            outcome.resets_at,
            outcome.limiting_window,
        )
        attempt = Attempt(
            sent=send.rung, ran_on=send.rung, why=send.why, outcome=seen, retry=send.retry
        )
        return evidence.after(attempt)

    def _record(self, evidence: Evidence, record: Record) -> None:
        """``record_rate_limit_event`` against the credential the attempt ran on."""
        last = evidence.attempts[-1]
        ran_on = last.ran_on or (evidence.agent.baseline if evidence.agent is not None else None)
        refusal = record.refusal
        if refusal.failure_kind is None or ran_on is None:
            return
        self.pool.record_refusal(
            credential_kind=ran_on.kind.value,
            subscription_id=ran_on.subscription_id,
            failure_kind=refusal.failure_kind,
            resets_at=last.outcome.resets_at,
            limiting_window=last.outcome.limiting_window,
            family=self.family,
            throttle=refusal.throttle,
            now=self.now,
        )

    def _end(self, evidence: Evidence, action: Finish | Park | Fail) -> None:
        if isinstance(action, Finish):
            self._finish(evidence, action)
            return
        if isinstance(action, Park):
            self.policy.parked += 1
        if action.notify_exhausted:
            self.pool.notify(
                dedup_key=f"pool-exhausted:{self.agent}", ttl=EXHAUSTED_NOTICE_TTL, now=self.now
            )

    def _finish(self, evidence: Evidence, finish: Finish) -> None:
        """``execution/served.py``: the commit the planner asked for, then its notice.

        The commit expects the plan the turn started on; when another turn moved the
        agent meanwhile, it loses and changes nothing (no notice), as in production.
        """
        served = finish.served_by
        origin = evidence.agent.origin if evidence.agent is not None else None
        if finish.switch is not None and finish.switch.commit and served is not None:
            if served.subscription_id is not None and origin is not None:
                self.pool.commit(
                    agent=self.agent,
                    expected=origin,
                    subscription_id=served.subscription_id,
                    now=self.now,
                )
        since = self.policy.on_api_key_since
        if finish.notice is Notice.API_KEY_ROUTE:
            since[self.agent] = self.turn.at  # since this turn started, as served.py says
            self.pool.notify(
                dedup_key=f"api-key-route:{self.agent}", ttl=KEY_NOTICE_TTL, now=self.now
            )
        elif finish.notice is Notice.SUBSCRIPTION_RETURN:
            since[self.agent] = None
            self.pool.notify(now=self.now)  # "Back on subscription"
