"""An in-memory turn for the planner's tables: it answers every ``Need`` from its
fields and applies every ``Send`` with the next scripted outcome, the way the executor
does against real backends. ``drive`` returns what the planner did, in order."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from routing.eligibility import Admitted, Candidate, Excluded, Reason
from routing.headroom.alternatives import Selection
from routing.headroom.classification import NO_EVIDENCE, Tier
from routing.headroom.ranking import Ranked
from routing.headroom.reading import Reading
from routing.plan_ahead.week_plan import Planned
from routing.planner import (
    KEY_RUNG,
    Action,
    AgentFacts,
    Ask,
    Attempt,
    BudgetRefused,
    Busy,
    Current,
    Evidence,
    Fail,
    Finish,
    KeyState,
    Legacy,
    Need,
    Outcome,
    Park,
    Previous,
    Record,
    RungRef,
    Send,
    SettingsFacts,
    TurnFacts,
    plan,
)
from routing.rung import RungKind
from routing.walk import Stop

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ORIGIN = 1
RESET = T0 + timedelta(hours=1)


def plan_rung(pk: int) -> RungRef:
    return RungRef(RungKind.SUBSCRIPTION, pk, f"plan-{pk}")


SERVED = Outcome(ok=True)
RATE_LIMITED = Outcome(
    ok=False, error_code="rate_limit", detail="You've hit your limit", resets_at=RESET
)
# A 429 without quota evidence: no reset, no claim, no usage-limit words.
THROTTLED = Outcome(ok=False, error_code="rate_limit", detail="API Error: 429 Slow down")
AUTH = Outcome(ok=False, error_code="auth", detail="OAuth token has expired")
UPSTREAM = Outcome(ok=False, error_code="upstream_error", detail="upstream 503")
MODEL = Outcome(ok=False, error_code="model_unsupported", detail="model not found")


@dataclass(frozen=True)
class BudgetSpent:
    """A consumed key budget (the planner's ``Closure``)."""

    reason: str = "the platform key's daily budget of $5.00 is spent"
    reopens_at: datetime = T0 + timedelta(hours=12)


@dataclass
class World:
    """The answers to the planner's questions; ``outcomes`` per rung key, in order."""

    admitted: bool = True
    ready: str = ""
    origin: int | None = ORIGIN
    routing_policy: str = "thrifty"
    # Why the policy forbids the assignment (its verdict is then ``policy``).
    policy_refusal: str = ""
    # An admin paused the assignment.
    paused: bool = False
    on_api_key: bool = False
    auto_switch: bool = True
    key_configured: bool = True
    switching_stop: Stop | None = None
    refusing: bool = False
    forecast_out: bool = False
    # Refusing only on a throttle's backoff.
    throttled: bool = False
    previous: Previous | None = None
    affinity_ok: bool = True
    # The plans the ranking offers, best first (the origin is never among them).
    ranked: tuple[int, ...] = (2, 3)
    last_resort: tuple[int, ...] = ()
    key: KeyState = KeyState(True)
    current: int | None = ORIGIN
    no_secret: frozenset[int] = frozenset()
    forecast_out_of: frozenset[int] = frozenset()
    readings: dict[int, Reading] = field(default_factory=dict)
    breaker_fails: bool = False
    breaker_opens_later: bool = False
    at_cap: frozenset[int] = frozenset()
    reserve_closed: BudgetSpent | None = None
    legacy: bool = False
    # The provider's subscription count (default: the origin and every ranked plan).
    pool_size: int | None = None
    # Placement: the assignment's weekly headroom expires late enough to look; the
    # ranked plans that are measured; where placement would go; the agent's last move.
    placeable: bool = False
    measured: frozenset[int] = frozenset()
    placement: int | None = None
    moved_at: datetime | None = None
    moved_from: int | None = None
    placement_due: bool = True
    # The agent's entry in the week plan (None: no plan).
    planned: Planned | None = None
    outcomes: dict[tuple[str, int | None], list[Outcome]] = field(default_factory=dict)
    default_outcome: Outcome = SERVED

    def assigned(self) -> Admitted | Excluded:
        """The assignment's verdict, as ``admit`` would give it for these fields."""
        if self.paused:
            return Excluded(Reason.PAUSED, f"its subscription 'plan-{self.origin}' is paused")
        if self.policy_refusal:
            return Excluded(Reason.POLICY, self.policy_refusal)
        if self.throttled:
            return Excluded(Reason.THROTTLED, "throttled")
        if self.refusing:
            return Excluded(Reason.REFUSING, "a fresh reading says it refuses")
        return Admitted(
            Candidate(ORIGIN, f"plan-{ORIGIN}", 0),
            Tier.MEASURED if self.placeable else Tier.UNKNOWN,
            NO_EVIDENCE,
            forecast_out=self.forecast_out,
            placeable=self.placeable,
        )

    def agent(self) -> AgentFacts:
        baseline = plan_rung(self.origin) if self.origin is not None else None
        return AgentFacts(
            name="bot",
            origin=self.origin,
            baseline=baseline,
            routing_policy=self.routing_policy,
            # Only an agent without a plan carries the policy's refusal itself.
            policy_refusal=self.policy_refusal if self.origin is None else "",
            on_api_key=self.on_api_key,
            moved_at=self.moved_at,
            moved_from=self.moved_from,
        )

    def selection(self, exclude: tuple[int, ...], now: datetime) -> Selection:
        ranked = tuple(
            Ranked(
                Candidate(pk, f"plan-{pk}", 0),
                Tier.MEASURED if pk in self.measured else Tier.UNKNOWN,
                NO_EVIDENCE,
            )
            for pk in self.ranked
            if pk not in exclude
        )
        last = tuple(
            Candidate(pk, f"plan-{pk}", 0, now - timedelta(hours=1), RESET)
            for pk in self.last_resort
            if pk not in exclude
        )
        return Selection(ranked=ranked, last_resort=last, now=now)


def turn(
    *, autonomous: bool = False, session: str = "", waits: bool = False, budget: float = 600
) -> TurnFacts:
    return TurnFacts(
        provider="anthropic",
        autonomous=autonomous,
        created_at=T0,
        budget_end=T0 + timedelta(seconds=budget),
        session_id=session,
        waits=waits,
        max_wait_seconds=6 * 3600,
    )


def _answer(world: World, evidence: Evidence, need: Need, now: datetime) -> Evidence:
    ask = need.ask
    if ask is Ask.BREAKER:
        return replace(evidence, admitted=world.admitted)
    if ask is Ask.READY:
        agent = None if world.ready else world.agent()
        legacy = Legacy(assignment=world.origin)
        # Readiness judges the assignment's row: a verdict only when a rule forbids it.
        verdict = world.assigned() if world.origin is not None else None
        forbidden = verdict if isinstance(verdict, Excluded) and verdict.forbidden else None
        return replace(evidence, ready=world.ready, agent=agent, legacy=legacy, assigned=forbidden)
    if ask is Ask.SETTINGS:
        settings = SettingsFacts(world.auto_switch, world.key_configured, world.switching_stop)
        return replace(evidence, settings=settings)
    if ask is Ask.ASSIGNED:
        return replace(evidence, assigned=world.assigned())
    if ask is Ask.AFFINITY:
        return replace(evidence, previous=world.previous)
    if ask is Ask.AFFINITY_PLAN:
        kept = plan_rung(need.ids[0]) if world.affinity_ok else None
        return replace(evidence, affinity_plan=kept)
    if ask is Ask.POOL_SIZE:
        size = world.pool_size
        if size is None:
            size = 1 + len(world.ranked) + len(world.last_resort)
        return replace(evidence, pool_size=size)
    if ask is Ask.SELECTION:
        exclude = (*need.ids, *world.at_cap)
        return evidence.learn(selection=world.selection(exclude, now))
    if ask is Ask.KEY:
        return evidence.learn(key=world.key)
    if ask is Ask.CURRENT:
        name = f"plan-{world.current}" if world.current is not None else ""
        return evidence.learn(current=Current(world.current, name))
    if ask is Ask.RUNGS:
        rungs = dict(evidence.rungs)
        missing = set(evidence.missing)
        for pk in need.ids:
            if pk in world.no_secret:
                missing.add(pk)
            else:
                rungs[pk] = f"plan-{pk}"
        return replace(evidence, rungs=rungs, missing=frozenset(missing))
    if ask is Ask.FORECAST:
        out = {**evidence.facts.forecast_out, need.ids[0]: need.ids[0] in world.forecast_out_of}
        return evidence.learn(forecast_out=out)
    if ask is Ask.READINGS:
        return evidence.learn(readings={k: v for k, v in world.readings.items() if k in need.ids})
    if ask is Ask.PLACEMENT_DUE:
        return evidence.learn(placement_due=world.placement_due)
    if ask is Ask.PLANNED:
        return replace(evidence, planned=world.planned)
    if ask is Ask.PLACEMENT:
        target = world.placement if world.placement in need.ids else None
        return evidence.learn(placement=target)
    if ask is Ask.BREAKER_FAILURE:
        return evidence.learn(breaker_after=world.breaker_fails)
    if ask is Ask.BREAKER_OPEN:
        return evidence.learn(breaker_open=world.breaker_opens_later)
    raise AssertionError(f"unexpected need {need}")


def _apply(
    world: World, evidence: Evidence, send: Send, queues: dict[Any, deque[Outcome]]
) -> Evidence:
    rung = send.rung
    if rung is not None and rung.subscription_id in world.at_cap:
        return evidence.after(Busy(rung, send.why, retry=send.retry))
    if rung is not None and rung.kind is RungKind.API_KEY and world.reserve_closed is not None:
        return evidence.after(BudgetRefused(world.reserve_closed, retry=send.retry))
    key = rung.key if rung is not None else ("none", None)
    queue = queues.setdefault(key, deque(world.outcomes.get(key, [])))
    outcome = queue.popleft() if queue else world.default_outcome
    legacy = evidence.legacy
    if world.legacy and not legacy.on:
        legacy = replace(legacy, on=True)
    if send.reassign:
        assert rung is not None
        legacy = replace(legacy, assignment=rung.subscription_id)
    ran_on = rung
    if legacy.on:
        # A legacy server ran the turn on whatever it was assigned.
        ran_on = plan_rung(legacy.assignment) if legacy.assignment is not None else None
    attempt = Attempt(sent=rung, ran_on=ran_on, why=send.why, outcome=outcome, retry=send.retry)
    return replace(evidence, legacy=legacy).after(attempt)


@dataclass
class Run:
    """What the planner did: its sends, its needs, and how the turn ended."""

    sends: list[Send]
    needs: list[Need]
    records: list[Record]
    end: Finish | Park | Fail
    evidence: Evidence

    @property
    def sent_on(self) -> list[str]:
        return [s.rung.name if s.rung is not None else "none" for s in self.sends]


def drive(world: World, facts: TurnFacts | None = None, *, now: datetime = T0) -> Run:
    """Loop the planner to the end of the turn against ``world``."""
    evidence = Evidence(turn=facts or turn())
    sends: list[Send] = []
    needs: list[Need] = []
    records: list[Record] = []
    queues: dict[Any, deque[Outcome]] = {}
    for _ in range(200):
        action: Action = plan(evidence, now=now)
        if isinstance(action, Need):
            needs.append(action)
            evidence = _answer(world, evidence, action, now)
        elif isinstance(action, Send):
            sends.append(action)
            evidence = _apply(world, evidence, action, queues)
        elif isinstance(action, Record):
            records.append(action)
            evidence = evidence.learn(recorded=True)
        else:
            return Run(sends, needs, records, action, evidence)
    raise AssertionError("the planner did not end the turn")


def key_served() -> dict[tuple[str, int | None], list[Outcome]]:
    return {KEY_RUNG.key: [SERVED]}
