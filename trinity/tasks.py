"""Celery adapters for notification delivery: take an id, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from trinity import clock, notification_channels


@shared_task(
    name="trinity.deliver_notification",
    bind=True,
    # The attempt count lives on the delivery row (the resume sweep may start a fresh
    # message mid-way); the service says when the attempts ran out.
    max_retries=None,
    acks_late=True,
    # One POST: the receiver timeout (10 s) plus the database writes around it.
    soft_time_limit=30,
    time_limit=45,
)
def deliver_notification(self: Any, delivery_id: int) -> str:
    """One attempt; on a retryable failure, again after the backoff the service chose."""
    outcome = notification_channels.delivery_attempt(delivery_id=delivery_id, now=clock.now())
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.outcome


@shared_task(name="trinity.resume_notification_deliveries", soft_time_limit=50, time_limit=60)
def resume_notification_deliveries() -> int:
    """Re-enqueue deliveries whose message was lost (a broker or worker outage)."""
    return notification_channels.deliveries_resume(now=clock.now())
