"""The gateway's answers to the planner's ``Need``: each reads one piece of evidence
about a gateway request, as ``execution/gathering.py`` does for an agent's turn.

A client session is to the gateway what an agent is to a turn: its plan is the
request's assignment (the walk's origin), the fleet's default routing policy is its
policy, and no agent server needs starting. Synchronous (the ORM and the cache): the
request's loop runs these in the gateway's thread pool. Whether a plan may serve is
``routing.eligibility``'s verdict, as for turns; nothing here judges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from gateway.models import GatewaySession
from routing import policy
from routing.eligibility import Admission, Role, forbidden
from routing.facts import AgentFacts
from routing.planner import (
    Ask,
    Current,
    Evidence,
    KeyState,
    Need,
    RungRef,
    SettingsFacts,
)
from routing.providers import key_label, platform_key_configured
from routing.rung import Rung
from routing.walk import Stop, key_refused_recently
from subscriptions import breaker, leases
from subscriptions.evidence_reads import (
    breaker_failure_observe,
    forecast_read,
    readings_read,
    rungs_read,
)
from subscriptions.key_refusals import key_latest_refusal
from subscriptions.key_spend import budgets_closed, fleet_budgets
from subscriptions.models import Subscription
from subscriptions.placement_look import placement_target
from subscriptions.plan_facts import candidate_of_plan, plan_facts_read, selection_read
from subscriptions.rung_secrets import key_rung, subscription_rungs
from subscriptions.selectors import subscription_count
from trinity.models import SystemSettings
from trinity.selectors import system_settings_get

# The runtime a provider's key is judged for (the key verdict's runtime gate).
RUNTIME: Final = {"anthropic": "claude-code", "openai-codex": "codex-cli"}


@dataclass
class Request:
    """What the gateway holds of one request while it is routed: its evidence, the
    secrets of the rungs it may send on, its session, and the trail."""

    key_id: int
    key_name: str
    provider: str
    session: GatewaySession
    evidence: Evidence
    rungs: dict[tuple[str, int | None], Rung] = field(default_factory=dict)
    system: SystemSettings | None = None
    # The provider's capped plans (id -> max concurrency), read with the opening and
    # kept with the session's evidence; None: not read yet.
    caps: dict[int, int] | None = None
    # The plan this request holds a concurrency lease on.
    lease_on: int | None = None

    def settings(self) -> SystemSettings:
        if self.system is None:
            self.system = system_settings_get()
        return self.system

    def plan_caps(self) -> dict[int, int]:
        """The provider's capped plans (one query, the first time)."""
        if self.caps is None:
            self.caps = leases.subscription_caps(self.provider)
        return self.caps

    def keep(self, rung: Rung) -> RungRef:
        self.rungs[rung.key] = rung
        return RungRef(rung.kind, rung.subscription_id, rung.name)

    def rung(self, ref: RungRef | None) -> Rung | None:
        return self.rungs.get(ref.key) if ref is not None else None

    @property
    def label(self) -> str:
        """The request's caller in notices and refusal records (no secret)."""
        return f"gateway key {self.key_name!r}"


def key_allowed(request: Request) -> bool:
    """Whether the fleet's key verdict lets a gateway request reach the platform key."""
    system = request.settings()
    return policy.key_verdict(
        fallback_on=system.subscription_api_key_fallback,
        key_configured=platform_key_configured(system, request.provider),
        routing_policy=system.default_routing_policy,
        agent_flag=None,
        runtime=RUNTIME[request.provider],
    ).allowed


def _breaker(request: Request, need: Need, now: datetime) -> Evidence:
    """Admitted unless the provider's breaker is open (a read: a gateway request never
    claims the half-open trial, which belongs to a turn that can report it)."""
    is_open = breaker.breaker_open_now(provider=request.provider, now=now)
    return replace(request.evidence, admitted=not is_open)


def _ready(request: Request, need: Need, now: datetime) -> Evidence:
    """The session as the planner's agent: its plan is the origin and the baseline; a
    session without one starts on the key (when the key may serve it)."""
    system = request.settings()
    origin = request.session.subscription_id
    if origin is None:
        origin = _place(request, now)
    baseline: RungRef | None = None
    row = None
    if origin is not None:
        row = Subscription.objects.filter(pk=origin, provider=request.provider).first()
        found = subscription_rungs([origin]).get(origin) if row is not None else None
        if found is None:
            origin, row = None, None
        else:
            baseline = request.keep(found)
    if baseline is None and key_allowed(request):
        key = key_rung(system, provider=request.provider)
        baseline = request.keep(key) if key is not None else None
    facts = AgentFacts(
        name=request.label,
        origin=origin,
        baseline=baseline,
        routing_policy=system.default_routing_policy,
        on_api_key=request.session.on_key,
    )
    assigned = None
    if row is not None:
        assigned = forbidden(candidate_of_plan(row, None), facts, request.evidence.turn, now=now)
    request.plan_caps()  # kept with the session's evidence: the served path needs them
    return replace(request.evidence, ready="", agent=facts, assigned=assigned)


def _place(request: Request, now: datetime) -> int | None:
    """A session without a plan (new, or on the key since every plan refused) is put
    on the best-ranked plan that admits it now, if any: a compare-and-set from no
    plan, so concurrent requests of one session agree on one."""
    system = request.settings()
    scout = AgentFacts(
        name=request.label, origin=None, baseline=None, routing_policy=system.default_routing_policy
    )
    admission = Admission.of(scout, request.evidence.turn, now=now)
    order = selection_read(admission, strategy=system.routing_strategy).order()
    if not order:
        return None
    session = request.session
    GatewaySession.objects.filter(pk=session.pk, subscription__isnull=True).update(
        subscription_id=order[0], updated_at=now
    )
    session.refresh_from_db(fields=["subscription", "on_key"])
    return session.subscription_id


def _settings(request: Request, need: Need, now: datetime) -> Evidence:
    system = request.settings()
    key = key_rung(system, provider=request.provider)
    if key is not None:
        request.keep(key)
    refusal = policy.leave_verdict(
        routing_policy=system.default_routing_policy, auto_switch=system.auto_switch_subscriptions
    ).refusal
    facts = SettingsFacts(
        auto_switch=system.auto_switch_subscriptions,
        key_configured=key is not None,
        switching_stop=None if refusal is None else Stop(refusal.value),
        key_name=key_label(request.provider),
    )
    return replace(request.evidence, settings=facts)


def _admission(request: Request, now: datetime, **out: frozenset[int]) -> Admission:
    agent = request.evidence.agent
    assert agent is not None  # noqa: S101 - asked only once the session is ready
    return Admission.of(agent, request.evidence.turn, now=now, **out)


def _assigned(request: Request, need: Need, now: datetime) -> Evidence:
    origin = request.evidence.agent.origin if request.evidence.agent else None
    assert origin is not None  # noqa: S101 - the planner asks only with an assignment
    row = Subscription.objects.get(pk=origin)
    verdict = _admission(request, now).judge(plan_facts_read(row), Role.ASSIGNED)
    return replace(request.evidence, assigned=verdict)


def _pool_size(request: Request, need: Need, now: datetime) -> Evidence:
    return replace(request.evidence, pool_size=subscription_count(request.provider))


def _selection(request: Request, need: Need, now: datetime) -> Evidence:
    """Every plan judged for the request (``ids``: tried already), the plans serving
    their cap (bar the one this request holds) left out."""
    caps = {pk: cap for pk, cap in request.plan_caps().items() if pk != request.lease_on}
    busy = frozenset(leases.subscriptions_at_capacity(caps, now=now))
    admission = _admission(request, now, tried=frozenset(need.ids), at_capacity=busy)
    strategy = request.settings().routing_strategy
    return request.evidence.learn(selection=selection_read(admission, strategy=strategy))


def _key(request: Request, need: Need, now: datetime) -> Evidence:
    """The key rung: the fleet's verdict, a recent refusal of that key, its fleet
    budgets (a gateway request has no agent budget)."""
    if not key_allowed(request):
        return request.evidence.learn(key=KeyState(False))
    system = request.settings()
    latest = key_latest_refusal(system, now=now, provider=request.provider)
    if latest is not None and key_refused_recently(
        failure_kind=latest[0], occurred_at=latest[1], now=now
    ):
        return request.evidence.learn(key=KeyState(False))
    closed = budgets_closed(fleet_budgets(system=system, provider=request.provider), now=now)
    return request.evidence.learn(key=KeyState(closed is None, closed))


def _current(request: Request, need: Need, now: datetime) -> Evidence:
    """The session's plan as it reads now (a concurrent request may have moved it)."""
    current_id, current_name = (
        GatewaySession.objects.filter(pk=request.session.pk)
        .values_list("subscription_id", "subscription__name")
        .get()
    )
    return request.evidence.learn(current=Current(current_id, current_name or ""))


def _rungs(request: Request, need: Need, now: datetime) -> Evidence:
    return rungs_read(request.evidence, need, request.keep)


def _forecast(request: Request, need: Need, now: datetime) -> Evidence:
    return forecast_read(request.evidence, need, _admission(request, now))


def _placement(request: Request, need: Need, now: datetime) -> Evidence:
    origin = request.evidence.agent.origin if request.evidence.agent else None
    assert origin is not None  # noqa: S101 - placement is asked only with an assignment
    target = placement_target(origin, need.ids, now=now, family=request.evidence.turn.family)
    return request.evidence.learn(placement=target)


def _placement_due(request: Request, need: Need, now: datetime) -> Evidence:
    """A session is never moved by placement: it stays on its plan while the plan
    serves (the provider's prompt cache); only a refusal or a forecast moves it."""
    return request.evidence.learn(placement_due=False)


def _planned(request: Request, need: Need, now: datetime) -> Evidence:
    """A gateway session has no entry in the week plan (it plans agents): it stays on
    its plan while the plan serves, as for placement."""
    return replace(request.evidence, planned=None)


def _readings(request: Request, need: Need, now: datetime) -> Evidence:
    return readings_read(request.evidence, need)


def _breaker_failure(request: Request, need: Need, now: datetime) -> Evidence:
    return breaker_failure_observe(request.evidence, request.provider, now)


def _breaker_open(request: Request, need: Need, now: datetime) -> Evidence:
    is_open = breaker.breaker_open_now(provider=request.provider, now=now)
    return request.evidence.learn(breaker_open=is_open)


GATHER: Final[dict[Ask, Callable[[Request, Need, datetime], Evidence]]] = {
    Ask.BREAKER: _breaker,
    Ask.READY: _ready,
    Ask.SETTINGS: _settings,
    Ask.ASSIGNED: _assigned,
    Ask.POOL_SIZE: _pool_size,
    Ask.SELECTION: _selection,
    Ask.KEY: _key,
    Ask.CURRENT: _current,
    Ask.RUNGS: _rungs,
    Ask.FORECAST: _forecast,
    Ask.READINGS: _readings,
    Ask.PLACEMENT: _placement,
    Ask.PLACEMENT_DUE: _placement_due,
    Ask.PLANNED: _planned,
    Ask.BREAKER_FAILURE: _breaker_failure,
    Ask.BREAKER_OPEN: _breaker_open,
}


def gather(request: Request, need: Need, now: datetime) -> None:
    """Gather ``need`` into ``request.evidence`` (the affinity asks never come: a
    session's plan is the request's origin, not a previous turn's)."""
    request.evidence = GATHER[need.ask](request, need, now)
