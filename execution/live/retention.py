"""Dropping finished turns' events past their retention (the replay; the turn's row
stays): ``TRINITY_TURN_EVENTS_RETENTION_DAYS``, hourly from beat."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from execution.models import ExecutionEvent

# Rows deleted per statement: a backlog drains over several runs, never in one long lock.
BATCH = 10_000


def turn_events_prune(*, now: datetime) -> int:
    """Delete the events of turns that finished before the retention; how many."""
    cutoff = now - timedelta(days=settings.TRINITY_TURN_EVENTS_RETENTION_DAYS)
    ids = list(
        ExecutionEvent.objects.filter(execution__finished_at__lt=cutoff).values_list(
            "pk", flat=True
        )[:BATCH]
    )
    if not ids:
        return 0
    deleted, _ = ExecutionEvent.objects.filter(pk__in=ids).delete()
    return deleted
