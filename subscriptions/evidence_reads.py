"""The planner's evidence that an agent's turn and a gateway request gather alike:
the secrets of the rungs a walk may try, whether a plan a forecast routes to runs out
too, the stored readings, a provider failure counted against the breaker; and the
last attempt's refusal recorded against what it ran on.

Each takes the evidence and what differs between the two callers (who keeps a rung's
secret, whose admission judges, which provider) and returns the evidence with the
piece added; ``execution/gathering.py`` and ``gateway/server/gathering.py`` answer
their ``Need`` with these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Final

from routing.attempt_refusal import AttemptRefusal
from routing.eligibility import Admission, Admitted, PlanFacts, Role
from routing.planner import Evidence, Need, RungRef
from routing.rung import Rung
from subscriptions import breaker
from subscriptions.headroom.store import snapshots_read, turn_evidence_read
from subscriptions.rung_secrets import subscription_rungs
from subscriptions.services import record_rate_limit_event

# Tokens a walk decrypts at once: its pick and the next ones in rank order (a walk
# rarely tries more; decrypting all of a large pool cost most of a walked turn).
RUNG_BATCH: Final = 8


def rungs_read(evidence: Evidence, need: Need, keep: Callable[[Rung], RungRef]) -> Evidence:
    """The wanted secrets and the next few in rank order, in one query (``keep`` holds
    each secret where the planner never sees it)."""
    known = {*evidence.rungs, *evidence.missing}
    selection = evidence.last_selection
    order = selection.order() if selection is not None else []
    wanted = need.ids[0]
    after = order[order.index(wanted) + 1 :] if wanted in order else []
    batch = [*need.ids, *(i for i in after if i not in known)][:RUNG_BATCH]
    found = subscription_rungs(batch)
    for rung in found.values():
        keep(rung)
    rungs = {**evidence.rungs, **{pk: rung.name for pk, rung in found.items()}}
    missing = evidence.missing | {pk for pk in batch if pk not in found}
    return replace(evidence, rungs=rungs, missing=missing)


def forecast_read(evidence: Evidence, need: Need, admission: Admission) -> Evidence:
    """Whether the plan a forecast would route to (``need.ids[0]``) runs out as well:
    ``admit`` on its ranked row and its cached snapshot and forecast (one cache round
    trip)."""
    pk = need.ids[0]
    selection = evidence.last_selection
    ranked = selection.ranked if selection is not None else ()
    candidate = next(r.candidate for r in ranked if r.candidate.subscription_id == pk)
    cached = turn_evidence_read(pk)
    facts = PlanFacts(candidate, cached.reading, cached.forecast, cached.reachable)
    verdict = admission.judge(facts, Role.ALTERNATIVE)
    out = not isinstance(verdict, Admitted) or verdict.forecast_out
    return evidence.learn(forecast_out={**evidence.facts.forecast_out, pk: out})


def readings_read(evidence: Evidence, need: Need) -> Evidence:
    """The stored readings of ``need.ids`` (for the earliest known reset)."""
    return evidence.learn(readings=dict(snapshots_read(need.ids).readings))


def breaker_failure_observe(evidence: Evidence, provider: str, now: datetime) -> Evidence:
    """Count the last attempt's provider-level failure (5xx, timeout) against the
    provider's breaker: open after it? An account's refusal never counts."""
    last = evidence.attempts[-1]
    if not breaker.is_provider_failure(last.outcome.error_code):
        return evidence.learn(breaker_after=False)
    origin = evidence.agent.origin if evidence.agent else None
    kind, subscription_id = last.ran_on.key if last.ran_on else ("subscription", origin)
    after = breaker.breaker_failure_observe(
        provider=provider, credential=f"{kind}:{subscription_id}", now=now
    )
    return evidence.learn(breaker_after=after is breaker.BreakerState.OPEN)


def attempt_refusal_record(
    evidence: Evidence,
    refusal: AttemptRefusal,
    *,
    agent_name: str,
    agent_id: int | None,
    sent: Rung | None,
    now: datetime,
) -> Evidence:
    """Record the last attempt's refusal against the credential it ran on (``sent``:
    its secret, so a key's refusal names that key), as it happens: concurrent turns
    and requests see it at once."""
    last = evidence.attempts[-1]
    ran_on = last.ran_on
    assert ran_on is not None and refusal.failure_kind is not None  # noqa: S101
    record_rate_limit_event(
        agent_name=agent_name,
        agent_id=agent_id,
        credential_kind=ran_on.kind.value,
        subscription_id=ran_on.subscription_id,
        error_message=last.outcome.detail,
        failure_kind=refusal.failure_kind,
        resets_at=last.outcome.resets_at,
        limiting_window=last.outcome.limiting_window,
        family=evidence.turn.family,
        throttle=refusal.throttle,
        credential_fingerprint=sent.secret.fingerprint if sent is not None else "",
        now=now,
    )
    return evidence.learn(recorded=True)
