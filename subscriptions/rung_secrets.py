"""The rungs a turn sends on, with their secrets: the plans' tokens (one query for all
of them) and the platform key of the agent's provider. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable

from routing.providers import key_label, platform_key
from routing.rung import Rung, RungKind
from subscriptions.models import Subscription
from trinity.models import SystemSettings

# The columns ``plan_rung`` reads.
RUNG_COLUMNS = ("pk", "name", "token", "provider", "token_expires_at")


def plan_rung(row: Subscription) -> Rung:
    """A plan's rung with its token (and a signed-in plan's expiry, so a turn judges it
    without another read)."""
    return Rung(
        RungKind.SUBSCRIPTION,
        row.token,
        row.pk,
        row.name,
        row.provider,
        expires_at=row.token_expires_at,
    )


def subscription_rungs(ids: Iterable[int]) -> dict[int, Rung]:
    """The rungs of ``ids`` with their tokens, in one query (the walk's candidates)."""
    wanted = list(ids)
    if not wanted:
        return {}
    rows = Subscription.objects.filter(pk__in=wanted).only(*RUNG_COLUMNS)
    return {row.pk: plan_rung(row) for row in rows if row.token}


def key_rung(system: SystemSettings, *, provider: str) -> Rung | None:
    """The rung of ``provider``'s platform key (named for which key it is), or None when
    that provider has none configured. A turn asks with its agent's provider."""
    secret, _ = platform_key(system, provider)
    if secret is None:
        return None
    return Rung(RungKind.API_KEY, secret, name=key_label(provider), provider=provider)
