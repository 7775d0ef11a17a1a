"""Applying the planner's ``Finish``: the served row, the switch's compare-and-set
commit, the notice, and the fresh reading the served plan's headers carry."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum

from agents.client import TurnOutcome
from agents.models import Agent
from execution.models import Execution, Status
from execution.turn_state import TurnState
from routing.planner import Finish, Notice
from routing.rung import Rung, RungKind
from subscriptions.headroom.feed import headroom_reading_observe
from subscriptions.services import assignment_commit, switch_record
from trinity import clock
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

KEY_NOTICE_TTL = 24 * 3600
THROTTLE_NOTICE_TTL = 10 * 60
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


def served(state: TurnState, action: Finish) -> Execution:
    """Finish the served turn. A plain one (its own plan, no notice due) writes one row:
    no BEGIN and COMMIT round trips; a switch or a notice commits with the row."""
    now = clock.now()
    execution, agent, outcome = state.execution, state.agent, state.last_outcome
    assert outcome is not None  # noqa: S101 - a turn is served by an answered attempt
    ran_on = state.rung(action.served_by)
    origin = state.evidence.agent.origin if state.evidence.agent else None
    with contextlib.nullcontext() if action.plain else transaction.atomic():
        execution.status = Status.SUCCEEDED
        execution.response = outcome.response
        execution.model = outcome.model or execution.model or agent.model
        execution.served_by_kind = ran_on.kind.value if ran_on else ""
        if ran_on is None or ran_on.key != (RungKind.SUBSCRIPTION.value, origin):
            execution.served_by_subscription_id = ran_on.subscription_id if ran_on else None
        else:
            # Its own plan, loaded with the agent: the answer names it without a query.
            execution.served_by_subscription = agent.subscription
        execution.input_tokens = outcome.input_tokens
        execution.output_tokens = outcome.output_tokens
        if outcome.cost_usd is not None:
            execution.cost_usd = Decimal(str(outcome.cost_usd))
        execution.attempts = state.attempts
        execution.finished_at = now
        if action.switch is not None and ran_on is not None:
            execution.subscription_switch = _switch(state, ran_on, action, now)
        execution.save(update_fields=SERVED_FIELDS)
        if action.notice is not None and ran_on is not None:
            _NOTICES[action.notice](state, ran_on, now)
    _observe_headers(ran_on, outcome, now)
    logger.info("turn %s on %s: served by %s", execution.pk, agent.name, ran_on)
    return execution


def _observe_headers(ran_on: Rung | None, outcome: TurnOutcome, now: datetime) -> None:
    """The headers of the plan that was sent: a fresh reading for one cache write."""
    if (
        outcome.upstream_ratelimit
        and ran_on is not None
        and ran_on.kind is RungKind.SUBSCRIPTION
        and ran_on.subscription_id is not None
    ):
        headroom_reading_observe(
            subscription_id=ran_on.subscription_id, headers=outcome.upstream_ratelimit, now=now
        )


def _switch(state: TurnState, ran_on: Rung, action: Finish, now: datetime) -> dict[str, Any]:
    """The switch the served turn records, committed (compare-and-set) when planned."""
    assert action.switch is not None  # noqa: S101 - called for a switch only
    agent = state.agent
    origin = state.evidence.agent.origin if state.evidence.agent else None
    origin_name = agent.subscription.name if agent.subscription else None
    reason = action.switch.reason
    switch = {
        **switch_record(
            from_id=origin,
            from_name=origin_name,
            to_id=ran_on.subscription_id,
            to_name=ran_on.name,
            why=reason,
            now=now,
        ),
        "kind": ran_on.kind.value,
        "attempts": len(state.attempts),
        # A legacy walk committed each rung as it applied it.
        "committed": state.legacy_committed,
    }
    if action.switch.commit and origin is not None and ran_on.subscription_id is not None:
        switch["committed"] = assignment_commit(
            agent=agent,
            expected_subscription_id=origin,
            expected_subscription_name=origin_name,
            subscription_id=ran_on.subscription_id,
            subscription_name=ran_on.name,
            why=reason,
            now=now,
        )
    return switch


def _api_key_route(state: TurnState, ran_on: Rung, now: datetime) -> None:
    """The key served a turn no plan could: said once until a plan serves again."""
    agent = state.agent
    # Since this turn started: "Back on subscription" counts it among the key's turns.
    started = state.execution.created_at
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


def _subscription_return(state: TurnState, ran_on: Rung, now: datetime) -> None:
    """A plan serves an agent that was billing the key: what the key cost meanwhile."""
    agent = state.agent
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


def _throttle_detour(state: TurnState, ran_on: Rung, now: datetime) -> None:
    """A throttle sent the turn elsewhere: said once per agent and plan for the backoff
    period (10 minutes), and the assignment is not moved."""
    agent = state.agent
    origin = agent.subscription.name if agent.subscription else "its subscription"
    notification_send(
        kind="throttle_detour",
        title=f"Turn served by {ran_on.name!r}: {origin!r} was throttled",
        body=f"Agent {agent.name!r}: {origin!r} answered a 429 without quota evidence (a "
        f"throttle, backed off a minute), so the turn was served by {ran_on.name!r}; the "
        f"agent stays on {origin!r}.",
        agent_name=agent.name,
        agent_id=agent.pk,
        subscription_id=agent.subscription_id,
        dedup_key=f"throttle-detour:{agent.pk}:{agent.subscription_id}",
        dedup_ttl=THROTTLE_NOTICE_TTL,
        data={"served_by": ran_on.name, "stays_on": origin},
        now=now,
    )


_NOTICES = {
    Notice.API_KEY_ROUTE: _api_key_route,
    Notice.SUBSCRIPTION_RETURN: _subscription_return,
    Notice.THROTTLE_DETOUR: _throttle_detour,
}
