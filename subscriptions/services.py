from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from agents import tasks as agent_tasks
from agents.models import Agent, ProcessState
from subscriptions import billing
from subscriptions.models import FailureKind, RateLimitEvent, Subscription
from subscriptions.tokens import validate_plan_token
from trinity.crypto import Secret, fingerprint
from trinity.errors import Conflict, InvalidInput, NotFound
from trinity.redaction import redact

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
        raise InvalidInput(
            f"Unknown plan type for {provider}; choose one of: "
            + ", ".join(billing.plan_types(provider)),
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
        "token_fingerprint": fingerprint(token),
        "billing_class": entry.billing_class,
        "overage": entry.overage,
    }
    if existing is None:
        subscription = Subscription.objects.create(name=name, **values)
        logger.info("subscription registered: %s (…%s)", name, values["token_fingerprint"])
        return subscription, True
    rolled_over = existing.token != values["token"]
    for field, value in values.items():
        setattr(existing, field, value)
    existing.save()
    logger.info("subscription token replaced: %s (…%s)", name, values["token_fingerprint"])
    if rolled_over:
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
@transaction.atomic
def subscription_delete(*, subscription: Subscription) -> None:
    """Delete it; assigned agents become unassigned (SET_NULL), its events go with it.

    The agents that ran on it lose its token once the delete commits: their token
    files are deleted first, then `apply_credentials` moves each onto its new
    baseline (a mode change, so it is recreated and its boot environment no longer
    carries the deleted plan's token).
    """
    from agents.runtimes import get_runtime  # needed by this delete only

    # The row lock makes a concurrent assignment onto this plan wait for the delete
    # (its foreign-key check needs the row), so the list below is complete.
    Subscription.objects.select_for_update().filter(pk=subscription.pk).first()
    agents = list(Agent.objects.filter(subscription_id=subscription.pk).values_list("pk", "name"))
    subscription.delete()

    def forget_tokens() -> None:
        runtime = get_runtime()
        for _, name in agents:
            runtime.forget_credentials(name=name)

    transaction.on_commit(forget_tokens)
    for agent_id, _ in agents:
        _apply_credentials_after_commit(agent_id)


@transaction.atomic
def assignment_set(*, agent: Agent, subscription_id: int) -> Agent:
    """Assign ``agent`` to a subscription. Raises NotFound / InvalidInput."""
    subscription = Subscription.objects.filter(pk=subscription_id).first()
    if subscription is None:
        raise NotFound(f"No subscription with id {subscription_id}.")
    if subscription.provider != agent.provider:
        raise InvalidInput(
            f"Agent {agent.name!r} runs {agent.runtime}, which needs an {agent.provider} "
            f"subscription; {subscription.name!r} is {subscription.provider}.",
            field="subscription_id",
        )
    Agent.objects.filter(pk=agent.pk).update(subscription=subscription)
    agent.subscription = subscription
    _apply_credentials_after_commit(agent.pk)
    return agent


@transaction.atomic
def assignment_clear(*, agent: Agent) -> Agent:
    Agent.objects.filter(pk=agent.pk).update(subscription=None)
    agent.subscription = None
    _apply_credentials_after_commit(agent.pk)
    return agent


def record_rate_limit_event(
    *,
    agent_name: str,
    subscription_id: int,
    error_message: str,
    failure_kind: str | None,
    now: datetime,
) -> RateLimitEvent:
    """Record a refusal against the credential that was sent. The message is redacted."""
    if failure_kind is not None and failure_kind not in FailureKind.values:
        raise ValueError(f"unknown failure_kind {failure_kind!r}")
    if now.tzinfo is None:
        raise ValueError("occurred_at must be an aware datetime")
    return RateLimitEvent.objects.create(
        agent_name=agent_name,
        subscription_id=subscription_id,
        error_message=redact(error_message)[:ERROR_MESSAGE_MAX],
        failure_kind=failure_kind,
        occurred_at=now,
    )


def rate_limit_events_cleanup(*, now: datetime) -> int:
    """Delete events older than the retention (default 24h); returns how many."""
    cutoff = now - timedelta(seconds=settings.RATE_LIMIT_EVENT_RETENTION_SECONDS)
    deleted, _ = RateLimitEvent.objects.filter(occurred_at__lt=cutoff).delete()
    return deleted
