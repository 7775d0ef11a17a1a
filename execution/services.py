"""Run a turn: create the Execution, dispatch it to the agent server, record what happened.

This is the single-attempt dispatch: the turn runs on the agent's own credential
(its subscription, else the platform key where allowed), sent explicitly as the
turn's ``auth_override`` so the credential a refusal is recorded against is exactly
the one that went on the wire, whatever the assignment reads by the time it returns.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from agents import lifecycle
from agents.client import AgentServerUnavailable, TurnOutcome
from agents.lifecycle import Baseline
from agents.models import Agent, ProcessState
from execution.models import Execution, Status
from subscriptions.models import FailureKind
from subscriptions.services import record_rate_limit_event
from trinity import clock
from trinity.redaction import redact

logger = logging.getLogger(__name__)

# Only refusals of the credential itself count against it; a model rejection, a
# killed process or a container fault says nothing about the subscription.
REFUSAL_KINDS = {"rate_limit": FailureKind.RATE_LIMIT, "auth": FailureKind.AUTH}


def _attempt_entry(*, baseline: Baseline, outcome: TurnOutcome, at: datetime) -> dict[str, Any]:
    return {
        "credential_kind": baseline.mode,
        "subscription_id": baseline.subscription_id,
        "fingerprint": baseline.secret.fingerprint if baseline.secret else "",
        "outcome": "served" if outcome.ok else "refused",
        "error_code": outcome.error_code,
        "status_code": outcome.status_code,
        "override_echo": outcome.override_echo,
        "at": at.isoformat(),
    }


def execution_run(
    *,
    agent: Agent,
    message: str,
    trigger: str,
    model: str | None = None,
    timeout_seconds: float | None = None,
) -> Execution:
    """Run one turn synchronously and return the finished Execution.

    Never raises for a turn that failed: the Execution carries status and error_code.
    """
    timeout = timeout_seconds or settings.TRINITY_TURN_TIMEOUT_SECONDS
    execution = Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        trigger=trigger,
        message=message,
        status=Status.RUNNING,
        created_at=clock.now(),
    )
    if agent.process_state != ProcessState.RUNNING or not agent.endpoint:
        try:
            agent = lifecycle.agent_start(agent=agent)
        except Exception as exc:
            return _finish_failed(execution, "container_fault", f"the agent could not start: {exc}")
    baseline = lifecycle.baseline_credentials(agent)
    try:
        outcome = lifecycle.client_for(agent).run_turn(
            execution_id=str(execution.pk),
            message=message,
            timeout_seconds=timeout,
            model=model or agent.model or None,
            auth_override=baseline.auth_override(),
        )
    except AgentServerUnavailable as exc:
        return _finish_failed(execution, "container_fault", str(exc))
    now = clock.now()
    attempt = _attempt_entry(baseline=baseline, outcome=outcome, at=now)
    with transaction.atomic():
        execution.attempts = [attempt]
        execution.finished_at = now
        execution.model = outcome.model or (model or agent.model)
        if outcome.ok:
            execution.status = Status.SUCCEEDED
            execution.response = outcome.response
            execution.served_by_kind = baseline.mode
            execution.served_by_subscription_id = baseline.subscription_id
            execution.input_tokens = outcome.input_tokens
            execution.output_tokens = outcome.output_tokens
            if outcome.cost_usd is not None:
                execution.cost_usd = Decimal(str(outcome.cost_usd))
        else:
            execution.status = Status.FAILED
            execution.error_code = outcome.error_code
            execution.error_detail = redact(outcome.detail)
            execution.resets_at = outcome.resets_at
            failure_kind = REFUSAL_KINDS.get(outcome.error_code)
            if failure_kind is not None and baseline.subscription_id is not None:
                record_rate_limit_event(
                    agent_name=agent.name,
                    subscription_id=baseline.subscription_id,
                    error_message=outcome.detail,
                    failure_kind=failure_kind,
                    now=now,
                )
        execution.save()
    logger.info(
        "turn %s on %s: %s %s", execution.pk, agent.name, execution.status, execution.error_code
    )
    return execution


def _finish_failed(execution: Execution, error_code: str, detail: str) -> Execution:
    execution.status = Status.FAILED
    execution.error_code = error_code
    execution.error_detail = redact(detail)[:2000]
    execution.finished_at = clock.now()
    execution.save()
    return execution
