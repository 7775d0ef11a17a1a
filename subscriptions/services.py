from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from agents import tasks as agent_tasks
from agents.models import Agent, ProcessState
from agents.runtimes import get_runtime
from routing import billing
from routing.headroom.refusal_windows import refusal_limit
from subscriptions.headroom.first_look import first_look_after_commit
from subscriptions.headroom.store import RefusalMark, refusal_marker_write, snapshot_read
from subscriptions.models import CredentialKind, FailureKind, RateLimitEvent, Subscription
from subscriptions.tokens import plan_token_fingerprint, validate_plan_token
from subscriptions.week_plan.service import week_plan_requested
from trinity.crypto import Secret
from trinity.errors import Conflict, InvalidInput, NotFound
from trinity.notifications import notification_send
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

ERROR_MESSAGE_MAX = 2000


@transaction.atomic
def subscription_register(
    *, name: str, provider: str, plan_type: str, token: str
) -> tuple[Subscription, bool]:
    """Create the subscription or, when ``name`` exists, replace its token and plan.

    Returns ``(subscription, created)``. Raises InvalidInput for a bad token, plan or
    name, and Conflict when a provider change would strand assigned agents.
    """
    name = name.strip()
    if not name:
        raise InvalidInput("A name is required.", field="name")
    token = validate_plan_token(provider=provider, token=token)
    entry = billing.lookup(provider, plan_type)
    if entry is None:
        # An uncurated type would be billing class "unknown" (metered, no hard stop):
        # refuse it here rather than register a plan whose overage nobody checked.
        raise InvalidInput(
            f"Unknown plan type for {provider}; choose one of: "
            + ", ".join(billing.plan_types(provider))
            + " (plan types not in the billing catalog are not accepted).",
            field="plan_type",
        )
    existing = Subscription.objects.select_for_update().filter(name=name).first()
    if existing is not None and existing.provider != provider and existing.agents.exists():
        raise Conflict(
            f"{name!r} is a {existing.provider} subscription with agents assigned; "
            "unassign them before changing its provider.",
            field="provider",
        )
    values = {
        "provider": provider,
        "plan_type": plan_type,
        "token": Secret(token),
        "token_fingerprint": plan_token_fingerprint(provider=provider, token=token),
        # A pasted token is never refreshed: a sign-in from the panel sets these after.
        "refresh_token": None,
        "token_expires_at": None,
        "billing_class": entry.billing_class,
        "overage": entry.overage,
    }
    if existing is None:
        subscription = Subscription.objects.create(name=name, **values)
        logger.info("subscription registered: %s (…%s)", name, values["token_fingerprint"])
        first_look_after_commit(subscription.pk)
        return subscription, True
    rolled_over = existing.token != values["token"]
    for field, value in values.items():
        setattr(existing, field, value)
    existing.save()
    logger.info("subscription token replaced: %s (…%s)", name, values["token_fingerprint"])
    if rolled_over:
        first_look_after_commit(existing.pk)
        # Key rollover: every running agent on this subscription gets the new token.
        running = list(
            existing.agents.filter(process_state=ProcessState.RUNNING).values_list("pk", flat=True)
        )
        for agent_id in running:
            _apply_credentials_after_commit(agent_id)
    return existing, False


def _apply_credentials_after_commit(agent_id: int) -> None:
    transaction.on_commit(lambda: agent_tasks.apply_credentials.delay(agent_id))


@transaction.atomic
def subscription_delete(*, subscription: Subscription) -> None:
    """Delete it; assigned agents become unassigned (SET_NULL), its events go with it.

    The agents that ran on it lose its token once the delete commits: their token
    files are deleted first, then `apply_credentials` moves each onto its new
    baseline (a mode change, so it is recreated and its boot environment no longer
    carries the deleted plan's token).
    """
    # The row lock makes a concurrent assignment onto this plan wait for the delete
    # (its foreign-key check needs the row), so the list below is complete.
    Subscription.objects.select_for_update().filter(pk=subscription.pk).first()
    agents = list(
        Agent.objects.filter(subscription_id=subscription.pk).values_list("pk", "runtime_key")
    )
    subscription.delete()

    def forget_tokens() -> None:
        runtime = get_runtime()
        for _, runtime_key in agents:
            runtime.forget_credentials(name=runtime_key)

    transaction.on_commit(forget_tokens)
    for agent_id, _ in agents:
        _apply_credentials_after_commit(agent_id)


@transaction.atomic
def subscription_pause_set(
    *, subscription: Subscription, paused: bool, actor: str, now: datetime
) -> Subscription:
    """Pause ``subscription`` (no turn, walk or placement uses it from the next decision
    on: ``routing.eligibility``'s ``Reason.PAUSED``) or resume it. A conditional update:
    pausing a paused plan keeps its first pause (who and when), resuming a plan in
    service changes nothing, and neither says anything. A change is told once to every
    operator (a pool notice: their agents' turns move off it or may use it again).

    Turns already running on it finish there; agents assigned to it keep the
    assignment, and their next turn starts on the best plan it may use (committed when
    it serves), or fails when none can take it. Returns the row as it reads after."""
    if paused:
        changed = Subscription.objects.filter(pk=subscription.pk, paused_at__isnull=True).update(
            paused_at=now, paused_by=actor
        )
    else:
        changed = Subscription.objects.filter(pk=subscription.pk, paused_at__isnull=False).update(
            paused_at=None, paused_by=""
        )
    subscription.refresh_from_db(fields=["paused_at", "paused_by"])
    if changed:
        week_plan_requested()
        verb = "paused" if paused else "resumed"
        notification_send(
            kind=f"subscription_{verb}",
            title=f"Subscription {subscription.name!r} {verb} by {actor}",
            body=f"{actor} {verb} {subscription.name!r} at {now:%Y-%m-%d %H:%M:%S} UTC: "
            + ("no turn uses it until it is resumed." if paused else "turns may use it again."),
            subscription_id=subscription.pk,
            data={"actor": actor, "subscription": subscription.name, "at": now.isoformat()},
            now=now,
        )
        logger.info("%s %s subscription %s", actor, verb, subscription.name)
    return subscription


def _assignment_write(*, agent: Agent, expected: int | None, subscription_id: int | None) -> None:
    """Compare-and-set the assignment; raises Conflict when it moved meanwhile.

    The expectation is what the caller read: a switch committed by a turn (or another
    operator) between that read and this write is not overwritten blind.
    """
    same = Q(subscription__isnull=True) if expected is None else Q(subscription_id=expected)
    written = Agent.objects.filter(same, pk=agent.pk).update(subscription_id=subscription_id)
    if written != 1:
        raise Conflict(
            f"Agent {agent.name!r} was reassigned meanwhile; reload and try again.",
            field="subscription_id",
        )
    agent.subscription_id = subscription_id
    _apply_credentials_after_commit(agent.pk)
    week_plan_requested()


@transaction.atomic
def assignment_set(*, agent: Agent, subscription_id: int) -> Agent:
    """Assign ``agent`` to a subscription, expecting the assignment ``agent`` carries.

    Raises NotFound / InvalidInput, and Conflict when the assignment changed since
    ``agent`` was read.
    """
    subscription = Subscription.objects.filter(pk=subscription_id).first()
    if subscription is None:
        raise NotFound(f"No subscription with id {subscription_id}.")
    if subscription.provider != agent.provider:
        raise InvalidInput(
            f"Agent {agent.name!r} runs {agent.runtime}, which needs an {agent.provider} "
            f"subscription; {subscription.name!r} is {subscription.provider}.",
            field="subscription_id",
        )
    if agent.subscription_id == subscription.pk:
        return agent
    _assignment_write(agent=agent, expected=agent.subscription_id, subscription_id=subscription.pk)
    agent.subscription = subscription
    return agent


@transaction.atomic
def assignment_clear(*, agent: Agent) -> Agent:
    """Unassign ``agent``, expecting the assignment it carries; Conflict if it moved."""
    if agent.subscription_id is None:
        return agent
    _assignment_write(agent=agent, expected=agent.subscription_id, subscription_id=None)
    agent.subscription = None
    return agent


def switch_record(
    *,
    from_id: int | None,
    from_name: str | None,
    to_id: int | None,
    to_name: str,
    why: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """What a switch says about itself (the agent's ``last_switch``, the execution's
    ``subscription_switch``, the notice's data): where from and to, why, in a sentence."""
    return {
        "from": from_id,
        "from_name": from_name,
        "to": to_id,
        "to_name": to_name,
        "why": why,
        "explanation": switch_explanation(why),
        "at": now.isoformat(),
    }


@transaction.atomic
def assignment_commit(
    *,
    agent: Agent,
    expected_subscription_id: int,
    expected_subscription_name: str | None,
    subscription_id: int,
    subscription_name: str,
    why: dict[str, Any],
    now: datetime,
) -> bool:
    """Commit the subscription a walked turn was served by: once, across processes.

    A compare-and-set expecting the subscription the turn started on: of concurrent
    turns that each found a server, exactly one wins. The winner's switch is recorded
    on the agent, its server is hot-reloaded after the commit, and ONE notification
    says where it went and why. Returns whether this call won.
    """
    switch = switch_record(
        from_id=expected_subscription_id,
        from_name=expected_subscription_name,
        to_id=subscription_id,
        to_name=subscription_name,
        why=why,
        now=now,
    )
    won = (
        Agent.objects.filter(pk=agent.pk, subscription_id=expected_subscription_id).update(
            subscription_id=subscription_id, last_switch=switch
        )
        == 1
    )
    if not won:
        return False
    agent.subscription_id = subscription_id
    agent.last_switch = switch
    _apply_credentials_after_commit(agent.pk)
    week_plan_requested()
    notification_send(
        kind="subscription_switched",
        title=f"Subscription auto-switched to {subscription_name!r}",
        body=f"Agent {agent.name!r}: {switch['explanation']}",
        agent_name=agent.name,
        agent_id=agent.pk,
        subscription_id=subscription_id,
        data=switch,
        now=now,
    )
    logger.info(
        "agent %s: switched subscription %s -> %s",
        agent.name,
        expected_subscription_id,
        subscription_id,
    )
    return True


def switch_explanation(why: dict[str, Any]) -> str:
    """One sentence on why a switch went where it did, from the walk's reason."""
    if why.get("why") == "rebalance":  # headroom/rebalance.py: no turn was refused
        return (
            f"the balanced strategy moved it between turns ({why.get('move')}): its plan "
            f"had {why.get('from')}; this one has {why.get('to')}."
        )
    refused = why.get("refused") or "its subscription refused the turn"
    if why.get("why") == "placement":  # headroom/placement.py: nothing refused
        return (
            f"{refused}: it was moved at a turn boundary so that weekly headroom that "
            "would be lost at a reset is used first."
        )
    tier = why.get("tier")
    if why.get("throttled"):
        return (
            f"{refused}: a throttle (a 429 without quota evidence, backed off a minute), "
            "so the turn was served elsewhere and the assignment is unchanged."
        )
    if why.get("why") == "api_key":
        return (
            f"{refused}; the turn ran on the platform API key, billed per token "
            "(the assignment is unchanged)."
        )
    if tier == "measured":
        where = (
            f"it had the most headroom of {why.get('candidate_count')} alternative(s) "
            f"({why.get('seven_day')}% of its weekly and {why.get('five_hour')}% of its "
            "5-hour limit used)"
        )
    elif why.get("readmitted"):
        where = f"it was readmitted ({why['readmitted'].replace('_', ' ')})"
    elif why.get("why") == "last_resort":
        where = "it was the last resort (it had refused within the last 2 hours)"
    else:
        where = "no fresh headroom reading was available for it; it was chosen by load order"
    return f"{refused}; the turn was served here because {where}."


def record_rate_limit_event(
    *,
    agent_name: str,
    agent_id: int | None = None,
    credential_kind: str = CredentialKind.SUBSCRIPTION,
    subscription_id: int | None,
    error_message: str,
    failure_kind: str | None,
    now: datetime,
    resets_at: datetime | None = None,
    limiting_window: str = "",
    throttle: bool = False,
    family: str | None = None,
    credential_fingerprint: str = "",
) -> RateLimitEvent:
    """Record a refusal against the credential that was sent. The message is redacted.

    A subscription's rate-limit refusal records the window it was limited by:
    ``limiting_window`` when the runtime saw the provider's claim, else the one its
    cached reading names among the windows the refused turn spends (``family`` is its
    family window, None when unknown; ``refusal_windows.refusal_window``). A
    ``throttle`` (a 429 with no quota evidence: ``AttemptRefusal.throttle``) records
    ``throttle`` and, as its ``resets_at``, the end of a short backoff
    (``throttle.throttle_backoff``), so the readmission that follows a reset
    applies; unless the cached reading shows a blocked window, which makes it a quota
    refusal after all. A key refusal keeps ``credential_fingerprint``, the key's last 4:
    it belongs to that key, not to whichever key is configured later. The event also
    leaves a marker beside the headroom snapshot, so the next turn's pre-dispatch check
    reads both in one cache round trip.
    """
    if failure_kind is not None and failure_kind not in FailureKind.values:
        raise ValueError(f"unknown failure_kind {failure_kind!r}")
    if now.tzinfo is None or (resets_at is not None and resets_at.tzinfo is None):
        raise ValueError("occurred_at and resets_at must be aware datetimes")
    on_plan = credential_kind == CredentialKind.SUBSCRIPTION
    if on_plan and subscription_id is not None and failure_kind == FailureKind.RATE_LIMIT:
        limiting_window, resets_at = _plan_refusal_limit(
            subscription_id,
            resets_at=resets_at,
            claim=limiting_window,
            throttle=throttle,
            family=family,
            now=now,
        )
    event = RateLimitEvent.objects.create(
        agent_id=agent_id,
        agent_name=agent_name,
        credential_kind=credential_kind,
        subscription_id=subscription_id if credential_kind == CredentialKind.SUBSCRIPTION else None,
        error_message=redact(error_message)[:ERROR_MESSAGE_MAX],
        failure_kind=failure_kind,
        limiting_window=limiting_window,
        resets_at=resets_at,
        occurred_at=now,
        credential_fingerprint=credential_fingerprint if not on_plan else "",
    )
    if event.subscription_id is not None:
        _refusal_mark(event)
    return event


def _refusal_mark(event: RateLimitEvent) -> None:
    """The marker beside the plan's headroom snapshot that pre-dispatch reads."""
    assert event.subscription_id is not None  # noqa: S101 - only a plan's refusal is marked
    refusal_marker_write(
        event.subscription_id,
        RefusalMark(
            at=event.occurred_at,
            failure_kind=event.failure_kind,
            resets_at=event.resets_at,
            limiting_window=event.limiting_window,
        ),
        ttl=settings.RATE_LIMIT_WINDOW_SECONDS,
    )


def _plan_refusal_limit(
    pk: int,
    *,
    resets_at: datetime | None,
    claim: str,
    throttle: bool,
    family: str | None,
    now: datetime,
) -> tuple[str, datetime | None]:
    """The window and reset a plan's rate-limit refusal records
    (``refusal_windows.refusal_limit`` on the plan's cached reading and its last refusals)."""
    return refusal_limit(
        # The refusal path only: one cache read, never a probe.
        snapshot_read(pk).get(pk),
        resets_at=resets_at,
        claim=claim,
        throttle=throttle,
        earlier=lambda: (
            RateLimitEvent.objects.filter(subscription_id=pk, occurred_at__lte=now)
            .order_by("-occurred_at")
            .values_list("limiting_window", "occurred_at")[:8]
        ),
        now=now,
        family=family,
    )


def rate_limit_events_cleanup(*, now: datetime) -> int:
    """Delete events older than the retention (default 24h); returns how many."""
    cutoff = now - timedelta(seconds=settings.RATE_LIMIT_EVENT_RETENTION_SECONDS)
    deleted, _ = RateLimitEvent.objects.filter(occurred_at__lt=cutoff).delete()
    return deleted
