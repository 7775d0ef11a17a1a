"""The first look at a plan's usage: a probe when its token is new, not at the next sweep.

A plan registered (or its token rotated) would otherwise read "no reading yet" until
the sampler's next beat, up to TRINITY_HEADROOM_SAMPLE_SECONDS later, and the walk
would rank it without headroom meanwhile.
"""

from __future__ import annotations

import logging

from celery import Task, shared_task
from django.db import transaction

from routing.headroom.reading import ReadingStatus
from subscriptions.headroom import sampler
from subscriptions.models import Subscription
from trinity import clock
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)


def first_look_after_commit(subscription_id: int) -> None:
    """Once the surrounding transaction commits, probe the subscription on a worker."""
    transaction.on_commit(lambda: probe_new_token.delay(subscription_id))


# A probe that errored (the upstream not up yet: `make run` starts the worker and the
# simulator side by side) is tried again a few times, seconds apart, rather than left
# to the next sweep.
RETRIES = 3
RETRY_SECONDS = 5


@shared_task(
    bind=True,
    name="subscriptions.headroom_first_look",
    max_retries=RETRIES,
    default_retry_delay=RETRY_SECONDS,
    soft_time_limit=sampler.configured_bounds().soft_time_limit,
    time_limit=sampler.configured_bounds().time_limit,
)
def probe_new_token(self: Task, subscription_id: int) -> str:
    """Probe one subscription whose token is new; the reading's status, or why not.

    Skipped when auto-refresh is off (the operator chose to probe by hand), when the
    subscription is gone, or when another probe of it is already running. An
    ``error`` reading is recorded and the probe retried up to RETRIES times.
    """
    if not system_settings_get().subscription_headroom_auto_refresh:
        return "auto_refresh_off"
    subscription = Subscription.objects.filter(pk=subscription_id).first()
    if subscription is None:
        return "gone"
    reading = sampler.headroom_probe_alone(subscription=subscription, now=clock.now())
    if reading is None:
        return "busy"
    logger.info("first look at %s: %s", subscription.name, reading.status.value)
    if reading.status is ReadingStatus.ERROR and self.request.retries < RETRIES:
        raise self.retry()
    return reading.status.value
