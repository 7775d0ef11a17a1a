"""Celery adapter for the audit log's retention."""

from __future__ import annotations

from celery import shared_task

from trinity import clock
from trinity.audit.services import audit_prune


@shared_task(name="audit.prune", soft_time_limit=240, time_limit=300)
def prune_audit_log() -> int:
    """One batch of entries past ``TRINITY_AUDIT_RETENTION_DAYS``; returns how many."""
    return audit_prune(now=clock.now())
