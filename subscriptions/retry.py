"""An admin's "retry now": a credential marked refused that is fine again (a plan whose
quota came back early, a key topped up with credit) is cleared at once instead of
waiting out its skip window.

Services: the refusal events inside the skip window are deleted (every reader of the
skip list, the key's pause and the throttle backoff counts those rows, so they agree at
once), a plan's refusal marker beside its snapshot is dropped, a plan is probed for a
fresh reading, and one notification audits who did it, when, and to which credential.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from routing import providers
from routing.providers import key_label, platform_key
from subscriptions.headroom.sampler import ProbeTooSoon, headroom_refresh
from subscriptions.headroom.store import refusal_marker_delete
from subscriptions.key_refusals import key_refusals_of
from subscriptions.models import RateLimitEvent, Subscription
from subscriptions.selectors import skip_window_start
from trinity.errors import Conflict
from trinity.models import SystemSettings
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

KIND = "credential_retry"


@dataclass(frozen=True, slots=True)
class RetryResult:
    """What a retry did: the refusals it cleared and, for a plan, what the probe read
    (its status, or why it was not probed)."""

    credential: str
    name: str
    fingerprint: str
    cleared: int
    probe: str = ""


def subscription_retry_now(*, subscription: Subscription, actor: str, now: datetime) -> RetryResult:
    """Clear ``subscription``'s refusals (skip list, throttle backoff, refusal marker),
    probe it for a fresh reading and audit the retry. A probe refused as too soon is
    reported, not raised: the refusals are cleared either way."""
    with transaction.atomic():
        cleared, _ = RateLimitEvent.objects.filter(
            subscription=subscription, occurred_at__gt=skip_window_start(now)
        ).delete()
        transaction.on_commit(lambda: refusal_marker_delete(subscription.pk))
    try:
        probe = headroom_refresh(subscription=subscription, now=now).status.value
    except ProbeTooSoon as exc:
        probe = f"not probed: {exc}"
    result = RetryResult(
        "subscription", subscription.name, subscription.token_fingerprint, cleared, probe
    )
    _audit(result, actor=actor, now=now)
    return result


@transaction.atomic
def platform_key_retry_now(
    *, actor: str, now: datetime, provider: str = providers.ANTHROPIC
) -> RetryResult:
    """Clear ``provider``'s configured platform key's refusals inside the skip window
    (those made with it, by fingerprint, and for the Anthropic key legacy rows of
    unknown key: ``key_refusals.key_refusals_of``; never the other provider's key's) and audit
    the retry. Nothing is sent: a probe of the key would bill it. Raises Conflict
    without that key, having written nothing (the settings row is read, never
    created, here)."""
    system = SystemSettings.objects.filter(pk=SystemSettings.SINGLETON_ID).first()
    secret, fingerprint = platform_key(system, provider) if system else (None, "")
    if secret is None:
        raise Conflict(f"No {key_label(provider)} is configured.")
    cleared, _ = RateLimitEvent.objects.filter(
        key_refusals_of(fingerprint, provider=provider),
        occurred_at__gt=skip_window_start(now),
    ).delete()
    result = RetryResult("api_key", key_label(provider), fingerprint, cleared)
    _audit(result, actor=actor, now=now)
    return result


def _audit(result: RetryResult, *, actor: str, now: datetime) -> None:
    """One notification for the admins (no subscription or agent: the fleet's)."""
    probe = f"; probe: {result.probe}" if result.probe else ""
    notification_send(
        kind=KIND,
        title=f"{actor} retried {result.name!r} (…{result.fingerprint}) now",
        body=f"{actor} cleared {result.cleared} refusal(s) of {result.name!r} "
        f"(…{result.fingerprint}) at {now:%Y-%m-%d %H:%M:%S} UTC{probe}.",
        data={
            "actor": actor,
            "credential": result.credential,
            "name": result.name,
            "fingerprint": result.fingerprint,
            "cleared": result.cleared,
            "probe": result.probe,
            "at": now.isoformat(),
        },
        now=now,
    )
    logger.info("%s retried %s now: %d refusal(s) cleared", actor, result.name, result.cleared)
