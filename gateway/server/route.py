"""A gateway request, routed by the turn planner: the loop of ``execution/turn.py``
with the gateway's gatherers, its upstream exchange in place of the agent server,
and the session in place of the agent.

The served path asks the planner with evidence cached for the session
(``SessionCache``: the breaker, the session's plan, its verdict, read at most
``TRINITY_GATEWAY_EVIDENCE_SECONDS`` ago), so a request on a plan that serves costs
no database or cache read; any refusal drops the session's entry, and the walk reads
everything fresh, in the thread pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final

from gateway.models import GatewaySession
from gateway.server.client import UpstreamClient
from gateway.server.exchange import Call, exchange
from gateway.server.finishing import finish, refusal_record
from gateway.server.gathering import Request, gather
from gateway.server.shapes import answer_error
from gateway.server.upstream import Refusal, Upstreams
from routing.headroom.recovery import binding_reset
from routing.headroom.windows import family_window
from routing.planner import (
    Attempt,
    Busy,
    Evidence,
    Fail,
    Finish,
    Need,
    Park,
    Record,
    Send,
    TurnFacts,
    plan,
)
from routing.rung import Rung, RungKind
from subscriptions.headroom.store import snapshots_read
from subscriptions.leases import lease_acquire, lease_release
from subscriptions.models import Subscription
from subscriptions.plan_facts import with_settings
from subscriptions.plan_refresh import REFRESH_AHEAD
from subscriptions.plan_wire import plan_wire_rung
from trinity import clock

# Far more than a walk needs (its rung cap is the pool's size + 2).
MAX_STEPS: Final = 200
# How long a gateway request may take, as a turn's budget (a forecast reads it).
BUDGET: Final = timedelta(minutes=10)
# Sessions whose evidence is cached at most (a flood of new sessions cannot grow it).
MAX_SESSIONS: Final = 50_000

Pool = Callable[..., Awaitable[Any]]


@dataclass
class Cached:
    session: GatewaySession
    evidence: Evidence
    rungs: dict[tuple[str, int | None], Rung]
    until: float
    caps: dict[int, int] | None = None


Ident = tuple[int, str, str]


@dataclass
class SessionCache:
    """(key, session, provider) -> the opening evidence of its last served request.

    One request per session gathers at a time: a burst of a session's requests that
    finds no entry (its first requests, or the entry just expired) waits for the
    first one's evidence instead of each reading the database (``claim``/``settle``).
    """

    seconds: float
    entries: dict[Ident, Cached] = field(default_factory=dict)
    gathering: dict[Ident, asyncio.Future[None]] = field(default_factory=dict)

    def get(self, ident: Ident) -> Cached | None:
        cached = self.entries.get(ident)
        if cached is None or cached.until < time.monotonic():
            return None
        return cached

    async def claim(self, ident: Ident) -> Cached | None:
        """The session's entry, waiting for a request that is gathering it; None: the
        caller gathers, and must ``settle`` when it has (or has given up)."""
        while (cached := self.get(ident)) is None:
            pending = self.gathering.get(ident)
            if pending is None:
                self.gathering[ident] = asyncio.get_running_loop().create_future()
                return None
            await asyncio.shield(pending)
        return cached

    def settle(self, ident: Ident) -> None:
        pending = self.gathering.pop(ident, None)
        if pending is not None and not pending.done():
            pending.set_result(None)

    def put(self, ident: Ident, request: Request, opening: Evidence) -> None:
        if self.seconds > 0:
            if len(self.entries) >= MAX_SESSIONS:
                self.entries.clear()
            self.entries[ident] = Cached(
                request.session,
                opening,
                dict(request.rungs),
                time.monotonic() + self.seconds,
                request.caps,
            )
        self.settle(ident)

    def remember(self, ident: Ident, rung: Rung) -> None:
        """A rung as it went on the wire (a Codex plan's refreshed token), for the
        session's next requests while the entry lives."""
        cached = self.entries.get(ident)
        if cached is not None:
            cached.rungs[rung.key] = rung

    def drop(self, ident: Ident) -> None:
        self.entries.pop(ident, None)


@dataclass
class Router:
    """What routing a request needs: the pooled client, the upstreams, the thread
    pool, the session cache."""

    client: UpstreamClient
    upstreams: Upstreams
    pool: Pool
    sessions: SessionCache


def turn_facts(provider: str, model: str, now: datetime) -> TurnFacts:
    """A gateway request as the planner's turn: interactive, never parked, no chat
    affinity stage (the session's plan is its origin instead)."""
    return with_settings(
        TurnFacts(
            provider=provider,
            autonomous=False,
            created_at=now,
            budget_end=now + BUDGET,
            family=family_window(model),
        )
    )


def session_open(key_id: int, session_id: str, provider: str, now: datetime) -> GatewaySession:
    """The session row (created on its first request; "" is the key's own session)."""
    session, _ = GatewaySession.objects.get_or_create(
        key_id=key_id,
        session_id=session_id or f"key:{key_id}",
        provider=provider,
        defaults={"created_at": now, "updated_at": now},
    )
    return session


async def route(router: Router, call: Call, *, key_name: str) -> Fail | None:
    """Serve ``call``: the planner's actions until it finishes. Returns the Fail when
    nothing could serve (the caller answers it), None when an answer was sent."""
    ident = (call.key_id, call.inbound.session_id, call.provider)
    try:
        request = await _opening(router, call, key_name, ident)
        return await _steps(router, call, request, ident)
    finally:
        router.sessions.settle(ident)


async def _opening(router: Router, call: Call, key_name: str, ident: Ident) -> Request:
    """The request's evidence so far: the session's cached opening, else a bare start.

    The cached opening keeps its turn's facts when this request spends the same
    windows (its model's family): they differ only by when the turn started, which
    moves none of the opening's verdicts within the entry's life (seconds, against a
    forecast over minutes)."""
    now = clock.now()
    cached = await router.sessions.claim(ident)
    if cached is not None:
        evidence = cached.evidence
        if evidence.turn.family != family_window(call.inbound.model):
            evidence = replace(evidence, turn=turn_facts(call.provider, call.inbound.model, now))
        request = Request(call.key_id, key_name, call.provider, cached.session, evidence)
        request.rungs, request.caps = dict(cached.rungs), cached.caps
        return request
    facts = turn_facts(call.provider, call.inbound.model, now)
    session = await router.pool(
        session_open, call.key_id, call.inbound.session_id, call.provider, now
    )
    return Request(call.key_id, key_name, call.provider, session, Evidence(turn=facts))


async def _steps(router: Router, call: Call, request: Request, ident: Ident) -> Fail | None:
    """The planner's actions, applied until one ends the request."""
    for _ in range(MAX_STEPS):
        action = plan(request.evidence, now=clock.now())
        if isinstance(action, Need):
            await router.pool(gather, request, action, clock.now())
        elif isinstance(action, Send):
            if action.rung is None:
                # No plan admits the session and the key may not serve it.
                return await router.pool(_nothing_serves, request, clock.now())
            if not request.evidence.history:
                router.sessions.put(ident, request, request.evidence)
            if not await _send(router, call, request, action, ident):
                return None
        elif isinstance(action, Record):
            router.sessions.drop(ident)
            await router.pool(refusal_record, request, action, now=clock.now())
        elif isinstance(action, Finish):
            if not action.plain:
                router.sessions.drop(ident)
                call.switched = await router.pool(finish, request, action, now=clock.now())
            return None
        elif isinstance(action, Park | Fail):
            router.sessions.drop(ident)
            return action if isinstance(action, Fail) else _parked(action)
    raise RuntimeError(f"the planner did not end gateway request {call.request_id}")


def _nothing_serves(request: Request, now: datetime) -> Fail:
    """The Fail of a session no plan admits and the key may not serve: the earliest
    reset any of the provider's plans is known to have."""
    ids = list(Subscription.objects.filter(provider=request.provider).values_list("pk", flat=True))
    family = request.evidence.turn.family
    resets = [
        reset
        for reading in snapshots_read(ids).readings.values()
        if (reset := binding_reset(reading, family)) is not None and reset > now
    ]
    return Fail(
        error_code="billing",
        detail="no subscription admits this request now, and the platform key may not serve it",
        resets_at=min(resets, default=None),
        exhausted=True,
    )


def _parked(action: Park) -> Fail:
    """A gateway request never waits for a reset: the client is told when to retry."""
    return Fail(error_code="billing", detail=action.detail, resets_at=action.until)


def _wire_form_due(rung: Rung, *, now: datetime) -> bool:
    """Whether a plan's rung must be put in its wire form before it is sent: a Codex
    plan's stored credential (once: its wire form carries the account), a signed-in
    Claude plan's access token about to expire (a date compare while it holds)."""
    if rung.provider != "anthropic":
        return not rung.account_id
    return rung.expires_at is not None and rung.expires_at - now <= REFRESH_AHEAD


async def _send(router: Router, call: Call, request: Request, action: Send, ident: Ident) -> bool:
    """One attempt; False once an answer went to the client and the request is over
    save for its finish (a client error relayed as it was)."""
    rung = request.rung(action.rung)
    assert rung is not None  # noqa: S101 - route() answers a session with no credential
    if rung.kind is RungKind.SUBSCRIPTION and _wire_form_due(rung, now=clock.now()):
        # Its wire form (the current access token, refreshed when due), kept with the
        # session's evidence: its next requests send it without a database read.
        rung = await router.pool(plan_wire_rung, rung, now=clock.now())
        request.rungs[rung.key] = rung
        router.sessions.remember(ident, rung)
    if not await _lease(router, call, request, rung):
        # The plan serves its cap: nothing was sent; the planner routes around it.
        assert action.rung is not None  # noqa: S101 - only a plan is capped
        request.evidence = request.evidence.after(Busy(action.rung, action.why, action.retry))
        return True
    result = await exchange(router.client, router.upstreams, call, rung)
    if result is None:
        return False
    outcome = result.outcome if isinstance(result, Refusal) else result
    request.evidence = request.evidence.after(_attempt(action, outcome))
    return True


async def _lease(router: Router, call: Call, request: Request, rung: Rung) -> bool:
    """Hold a concurrency lease on ``rung``'s plan when it is capped (the lease another
    plan of this request held goes back first); False when it serves its cap. An
    uncapped plan, or the key, costs nothing; an unreachable store enforces no cap."""
    plan = rung.subscription_id if rung.kind is RungKind.SUBSCRIPTION else None
    if plan is not None and plan == request.lease_on:
        return True  # a retry on the same plan keeps its slot
    if request.lease_on is not None:
        call.leases.remove(request.lease_on)
        held, request.lease_on = request.lease_on, None
        await router.pool(lease_release, subscription_id=held, holder=call.request_id)
    cap = (request.caps or {}).get(plan) if plan is not None else None
    if plan is None or cap is None:
        return True
    taken = await router.pool(
        lease_acquire,
        subscription_id=plan,
        holder=call.request_id,
        cap=cap,
        expires_at=clock.now() + BUDGET,
        now=clock.now(),
    )
    if taken:
        request.lease_on = plan
        call.leases.append(plan)
    return taken is not False


def _attempt(action: Send, outcome: Any) -> Attempt:
    return Attempt(
        sent=action.rung, ran_on=action.rung, why=action.why, outcome=outcome, retry=action.retry
    )


async def answer_fail(call: Call, action: Fail) -> None:
    """Nothing could serve: the provider-shaped 429 with the earliest known reset as
    ``Retry-After`` (an outage: 503)."""
    if action.error_code == "upstream_error":
        await answer_error(call.send, call.provider, 503, action.detail, retry_after=30)
        call.status = 503
        return
    retry_after = None
    if action.resets_at is not None:
        retry_after = max(1, int((action.resets_at - clock.now()).total_seconds()) + 1)
    message = f"No subscription or key of the team's pool can serve this now: {action.detail}"
    await answer_error(call.send, call.provider, 429, message, retry_after=retry_after or 60)
    call.status = 429
