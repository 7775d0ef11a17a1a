"""Which refusals belong to a platform key, the latest one, and when it stops closing
the key's rung. Reads only; whether the rung is open is ``key_rung_state``'s answer.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from routing import providers
from routing.providers import platform_key
from routing.walk import KEY_RATE_LIMIT_PAUSE, key_refused_recently
from subscriptions.models import CredentialKind, FailureKind, RateLimitEvent
from subscriptions.selectors import skip_window_start
from trinity.models import SystemSettings


def key_refusals_of(fingerprint: str, *, provider: str) -> Q:
    """The refusal rows that belong to ``provider``'s key of ``fingerprint``.

    A refusal belongs to the key it was made with (by fingerprint): a replaced key
    starts clean, and the other provider's key's refusals are not this one's. A row
    recorded before fingerprints were kept counts against the configured Anthropic key
    (the conservative reading of a refusal of unknown key: every such row was made
    with it, the only key there was then), never against the OpenAI key.
    """
    whose = Q(credential_fingerprint=fingerprint)
    if provider == providers.ANTHROPIC:
        whose |= Q(credential_fingerprint="")
    return whose & Q(credential_kind=CredentialKind.API_KEY)


def key_latest_refusal(
    system: SystemSettings, *, now: datetime, provider: str
) -> tuple[str | None, datetime] | None:
    """The latest refusal (failure kind, instant) of ``provider``'s key configured now,
    inside the skip window, or None (also when no key of ``provider`` is configured and
    only legacy rows could match an OpenAI key). Whose refusal is whose:
    ``key_refusals_of``."""
    secret, fingerprint = platform_key(system, provider)
    if secret is None and provider != providers.ANTHROPIC:
        return None
    return (
        RateLimitEvent.objects.filter(
            key_refusals_of(fingerprint, provider=provider),
            occurred_at__gt=skip_window_start(now),
        )
        .order_by("-occurred_at")
        .values_list("failure_kind", "occurred_at")
        .first()
    )


def key_reopens_at(*, failure_kind: str | None, refused_at: datetime) -> datetime:
    """When a key refusal stops closing the key's rung: 5 minutes after a 429, else
    when it leaves the skip window (the constants ``key_refused_recently`` reads)."""
    if failure_kind == FailureKind.RATE_LIMIT:
        return refused_at + KEY_RATE_LIMIT_PAUSE
    return refused_at + timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)


def key_refusal_view(
    system: SystemSettings, *, now: datetime, provider: str
) -> dict[str, Any] | None:
    """``provider``'s configured key's refusal that closes its rung now, for the Settings
    page: its fingerprint, kind, instant and reopening; None when the rung is not closed
    by one."""
    secret, fingerprint = platform_key(system, provider)
    latest = key_latest_refusal(system, now=now, provider=provider) if secret else None
    if latest is None:
        return None
    kind, refused_at = latest
    if not key_refused_recently(failure_kind=kind, occurred_at=refused_at, now=now):
        return None
    return {
        "fingerprint": fingerprint,
        "failure_kind": kind,
        "refused_at": refused_at,
        "reopens_at": key_reopens_at(failure_kind=kind, refused_at=refused_at),
    }
