"""What a served or refused gateway request writes: the refusal against the credential
it ran on, the session's switch (a compare-and-set, noticed once), and the notices a
session on the key owes. Synchronous: run in the gateway's thread pool.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from gateway.models import GatewaySession
from gateway.server.gathering import Request
from routing.planner import Finish, Notice, Record
from routing.rung import Rung, RungKind
from subscriptions.evidence_reads import attempt_refusal_record
from subscriptions.services import switch_record
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

KEY_NOTICE_TTL = 24 * 3600
THROTTLE_NOTICE_TTL = 10 * 60


def refusal_record(request: Request, action: Record, *, now: datetime) -> None:
    """Record the last attempt's refusal against the credential it ran on (concurrent
    turns and requests see it at once, as for an agent's turn)."""
    request.evidence = attempt_refusal_record(
        request.evidence,
        action.refusal,
        agent_name=request.label,
        agent_id=None,
        sent=request.rung(request.evidence.attempts[-1].ran_on),
        now=now,
    )


def finish(request: Request, action: Finish, *, now: datetime) -> bool:
    """The served request's switch (committed when planned) and notice; whether the
    session moved to the plan that served."""
    ran_on = request.rung(action.served_by)
    if ran_on is None:
        return False
    moved = False
    if action.switch is not None and action.switch.commit:
        moved = session_switch(request, ran_on, action.switch.reason, now=now)
    if action.notice is not None:
        _NOTICES[action.notice](request, ran_on, now)
    return moved


def session_switch(request: Request, ran_on: Rung, why: dict[str, Any], *, now: datetime) -> bool:
    """Move the session to the plan that served it, expecting the plan it started on:
    of concurrent requests of one session that each walked, exactly one wins, and only
    the winner tells the operator."""
    session = request.session
    origin = request.evidence.agent.origin if request.evidence.agent else None
    if origin is None or ran_on.subscription_id is None:
        return False
    won = (
        GatewaySession.objects.filter(pk=session.pk, subscription_id=origin).update(
            subscription_id=ran_on.subscription_id,
            switches=session.switches + 1,
            updated_at=now,
        )
        == 1
    )
    if not won:
        return False
    origin_name = request.rungs.get((RungKind.SUBSCRIPTION.value, origin))
    switch = switch_record(
        from_id=origin,
        from_name=origin_name.name if origin_name is not None else None,
        to_id=ran_on.subscription_id,
        to_name=ran_on.name,
        why=why,
        now=now,
    )
    notification_send(
        kind="gateway_session_switched",
        title=f"Gateway session moved to {ran_on.name!r}",
        body=f"{request.label.capitalize()}: {switch['explanation']}",
        subscription_id=ran_on.subscription_id,
        data={**switch, "gateway_key": request.key_name, "session": session.pk},
        now=now,
    )
    logger.info("gateway session %s: %s -> %s", session.pk, origin, ran_on.subscription_id)
    return True


def _key_route(request: Request, ran_on: Rung, now: datetime) -> None:
    """The key served a session no plan could: said once until a plan serves it again."""
    session = request.session
    GatewaySession.objects.filter(pk=session.pk).update(on_key=True, updated_at=now)
    notification_send(
        kind="gateway_api_key_route",
        level="warning",
        title="Gateway now billing the platform API key",
        body=f"{request.label.capitalize()}: every subscription refused; the request ran "
        "on the platform API key, billed per token.",
        dedup_key=f"gateway-key-route:{session.pk}",
        dedup_ttl=KEY_NOTICE_TTL,
        data={"gateway_key": request.key_name, "session": session.pk},
        now=now,
    )


def _subscription_return(request: Request, ran_on: Rung, now: datetime) -> None:
    session = request.session
    if GatewaySession.objects.filter(pk=session.pk, on_key=True).update(on_key=False) != 1:
        return  # a concurrent request already said it
    notification_send(
        kind="gateway_subscription_return",
        title=f"Gateway back on subscription {ran_on.name!r}",
        body=f"{request.label.capitalize()} is served by a plan again.",
        subscription_id=ran_on.subscription_id,
        data={"gateway_key": request.key_name, "session": session.pk},
        now=now,
    )


def _throttle_detour(request: Request, ran_on: Rung, now: datetime) -> None:
    session = request.session
    notification_send(
        kind="gateway_throttle_detour",
        title=f"Gateway request served by {ran_on.name!r}: its plan was throttled",
        body=f"{request.label.capitalize()}: its session's plan answered a 429 without "
        f"quota evidence, so {ran_on.name!r} served; the session stays on its plan.",
        dedup_key=f"gateway-throttle-detour:{session.pk}:{session.subscription_id}",
        dedup_ttl=THROTTLE_NOTICE_TTL,
        data={"gateway_key": request.key_name, "served_by": ran_on.name},
        now=now,
    )


_NOTICES = {
    Notice.API_KEY_ROUTE: _key_route,
    Notice.SUBSCRIPTION_RETURN: _subscription_return,
    Notice.THROTTLE_DETOUR: _throttle_detour,
}
