"""Celery adapters for notification delivery, both ways: each task takes an id and
calls one service, and ``deliveries_enqueue`` publishes the delivery task. The broker
is reached from here alone, so the services (``trinity/notification_channels.py``)
never name the tasks that call them, not even by a string.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from celery import shared_task

from trinity import clock, notification_channels

logger = logging.getLogger(__name__)


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
    """Re-enqueue deliveries whose message was lost (a broker or worker outage); returns
    how many."""
    overdue = notification_channels.deliveries_overdue(now=clock.now())
    deliveries_enqueue(overdue)
    return len(overdue)


def deliveries_enqueue(delivery_ids: Iterable[int]) -> None:
    """Hand each delivery to a worker. A broker that is down is logged, not raised:
    the rows stay pending and the resume sweep enqueues them later."""
    for delivery_id in delivery_ids:
        try:
            # No publish retries: a turn that sent a notice must not wait on the broker.
            deliver_notification.apply_async((delivery_id,), retry=False)
        except Exception as exc:  # noqa: BLE001 - any broker failure; the sweep resumes it
            logger.warning(
                "notification delivery %s not enqueued (%s); the resume sweep will retry",
                delivery_id,
                type(exc).__name__,
            )
