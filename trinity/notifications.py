"""Tell the operator, once: notifications deduplicated by key within a TTL.

The dedup marker is a cache ``add`` (``trinity.markers``, atomic across processes). When the cache
is unreachable the check falls back to the database, so an outage neither loses a
notification nor floods the operator.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from trinity.markers import marker_claim
from trinity.models import Notification
from trinity.redaction import redact

logger = logging.getLogger(__name__)


def _claim_dedup(key: str, ttl: int, now: datetime) -> bool:
    """True when this caller is the first to use ``key`` within ``ttl`` seconds."""
    claimed = marker_claim(f"notify:{key}", ttl=ttl)
    if claimed is None:  # the cache is down: fail safe on the database
        return not Notification.objects.filter(
            dedup_key=key, created_at__gt=now - timedelta(seconds=ttl)
        ).exists()
    return claimed


def notification_send(
    *,
    kind: str,
    title: str,
    now: datetime,
    level: str = Notification.Level.INFO,
    body: str = "",
    agent_name: str = "",
    subscription_id: int | None = None,
    dedup_key: str = "",
    dedup_ttl: int | None = None,
    data: dict[str, Any] | None = None,
) -> Notification | None:
    """Record a notification; returns None when ``dedup_key`` fired within the TTL.

    Title and body are redacted: a notification is shown in the panel verbatim.
    """
    if dedup_key:
        ttl = dedup_ttl or settings.TRINITY_NOTIFICATION_DEDUP_SECONDS
        if not _claim_dedup(dedup_key, ttl, now):
            return None
    notification = Notification.objects.create(
        kind=kind,
        level=level,
        title=redact(title)[:200],
        body=redact(body),
        agent_name=agent_name,
        subscription_id=subscription_id,
        dedup_key=dedup_key,
        data=data or {},
        created_at=now,
    )
    logger.info("notification %s: %s", kind, notification.title)
    return notification
