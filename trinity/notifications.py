"""Tell the operator, once: notifications deduplicated by key within a TTL.

The dedup marker is a cache ``add`` (``trinity.markers``, atomic across processes). When the cache
is unreachable the check falls back to the database, so an outage neither loses a
notification nor floods the operator.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from trinity.markers import marker_claim
from trinity.models import Notification
from trinity.notification_channels import channels_for, deliveries_create
from trinity.tasks import deliveries_enqueue
from trinity_contract.redaction import redact

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
    agent_id: int | None = None,
    subscription_id: int | None = None,
    dedup_key: str = "",
    dedup_ttl: int | None = None,
    data: dict[str, Any] | None = None,
) -> Notification | None:
    """Record a notification; returns None when ``dedup_key`` fired within the TTL.

    ``agent_id`` is the agent it is about: only that agent's owner (and admins) see it;
    one without an agent is the fleet's (admins) or, with ``subscription_id``, the
    shared pool's (every operator). Title and body are redacted: a notification is
    shown in the panel verbatim. Each
    enabled notification channel it matches (level, kinds) gets a pending delivery in
    the same transaction, enqueued to a worker on commit
    (``trinity.notification_channels``).
    """
    if dedup_key:
        ttl = dedup_ttl or settings.TRINITY_NOTIFICATION_DEDUP_SECONDS
        if not _claim_dedup(dedup_key, ttl, now):
            return None
    values = {
        "kind": kind,
        "level": level,
        "title": redact(title)[:200],
        "body": redact(body),
        "agent_name": agent_name,
        "agent_id": agent_id,
        "subscription_id": subscription_id,
        "dedup_key": dedup_key,
        "data": data or {},
        "created_at": now,
    }
    channels = channels_for(kind=kind, level=level)
    if not channels:
        notification = Notification.objects.create(**values)
    else:
        # The deliveries commit with the notification (a receiver that is down, or a
        # broker that loses the message, loses nothing); a worker posts them once the
        # caller's transaction commits, so no turn waits on a receiver.
        with transaction.atomic():
            notification = Notification.objects.create(**values)
            delivery_ids = deliveries_create(notification=notification, channels=channels, now=now)
        transaction.on_commit(partial(deliveries_enqueue, delivery_ids), robust=True)
    logger.info("notification %s: %s", kind, notification.title)
    return notification
