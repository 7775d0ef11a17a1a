"""Celery adapter for the audit log's retention."""

from __future__ import annotations

from celery import shared_task

from trinity import clock
from trinity.audit.services import PRUNE_BATCH, audit_prune
from trinity.retention import drain


@shared_task(name="audit.prune", soft_time_limit=240, time_limit=300)
def prune_audit_log() -> int:
    """Entries past ``TRINITY_AUDIT_RETENTION_DAYS``, batch by batch for up to three
    minutes; returns how many."""
    now = clock.now()
    return drain(lambda: audit_prune(now=now), batch=PRUNE_BATCH, budget_seconds=180)
