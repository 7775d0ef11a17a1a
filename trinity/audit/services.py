"""Writing the audit log, and the one way rows leave it (the retention prune)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pgtrigger
from django.conf import settings
from django.db import transaction

from trinity import clock
from trinity.audit.models import ActorKind, AuditEntry, Source

logger = logging.getLogger(__name__)

# Rows deleted per statement: a backlog drains over several runs, never in one long lock.
PRUNE_BATCH = 5_000
APPEND_ONLY = "audit.AuditEntry:append_only"


@dataclass
class Actor:
    """Who made a change: a kind, the user (if any) and their name as text, and the
    token or key it came through."""

    kind: str = ActorKind.SYSTEM
    user_id: int | None = None
    username: str = ""
    token: str = ""


@dataclass
class Change:
    """One entry to write: what happened to which object, and through which request."""

    action: str
    object_type: str = ""
    object_id: str = ""
    object_label: str = ""
    changes: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    path: str = ""
    route: str = ""
    status_code: int | None = None
    address: str = ""
    request_id: str = ""


def audit_record(*, actor: Actor, source: str, change: Change) -> AuditEntry:
    """Append one entry; returns it."""
    return AuditEntry.objects.create(
        created_at=clock.now(),
        actor_kind=actor.kind,
        actor_user_id=actor.user_id,
        actor_username=actor.username[:150],
        actor_token=actor.token[:64],
        source=source,
        address=change.address[:64],
        action=change.action[:100],
        method=change.method,
        path=change.path[:500],
        route=change.route[:200],
        status_code=change.status_code,
        object_type=change.object_type[:100],
        object_id=change.object_id[:200],
        object_label=change.object_label[:200],
        changes=change.changes,
        request_id=change.request_id[:64],
    )


def audit_command(
    *,
    action: str,
    object_type: str = "",
    object_id: str = "",
    object_label: str = "",
    changes: dict[str, Any] | None = None,
) -> AuditEntry:
    """Record a change a management command made: actor system, source manage.py.
    ``changes`` are ``{field: [before, after]}`` (a secret only by fingerprint)."""
    return audit_record(
        actor=Actor(kind=ActorKind.SYSTEM),
        source=Source.MANAGE_PY,
        change=Change(
            action=action,
            object_type=object_type,
            object_id=object_id,
            object_label=object_label,
            changes=changes or {},
        ),
    )


def audit_prune(*, now: datetime) -> int:
    """Delete one batch of entries older than ``TRINITY_AUDIT_RETENTION_DAYS`` (0:
    keep forever); returns how many. The only delete of the log: under the trigger's
    ignore, in a transaction of its own."""
    days = settings.TRINITY_AUDIT_RETENTION_DAYS
    if days == 0:
        return 0
    cutoff = now - timedelta(days=days)
    ids = list(
        AuditEntry.objects.filter(created_at__lt=cutoff)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)[:PRUNE_BATCH]
    )
    if not ids:
        return 0
    with transaction.atomic(), pgtrigger.ignore(APPEND_ONLY):
        deleted, _ = AuditEntry.objects.filter(pk__in=ids).delete()
    logger.info("audit log: pruned %d entries older than %s days", deleted, days)
    return deleted
