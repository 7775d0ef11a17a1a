"""The sampler: keeps each subscription's reading fresh so no turn ever has to probe.

A beat sweep probes the subscriptions whose reading is due (``rules.probe_due``),
leader-locked so two beats never double-probe, single-flight per subscription, with
bounded concurrency and a timeout per probe. ``headroom_refresh`` probes one
subscription on demand, at most once per floor interval.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections, transaction

from subscriptions.headroom import alerts, collectors
from subscriptions.headroom.reading import Reading, ReadingStatus, window_to_json
from subscriptions.headroom.rules import probe_due
from subscriptions.headroom.selection import last_failure_subquery
from subscriptions.headroom.store import Snapshots, snapshot_read, snapshots_read, snapshots_write
from subscriptions.models import HeadroomSample, Subscription
from trinity.errors import DomainError
from trinity.markers import marker_claim, marker_release, markers_release
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)

LEADER_MARKER = "sweep-leader"
# How long past the probe timeout a single-flight claim outlives a crashed prober.
INFLIGHT_GRACE_SECONDS = 5
_CHUNK = 500


class ProbeTooSoon(DomainError):
    """A probe ran (or is running) too recently; ``retry_after`` says when to ask again."""

    status_code = 429
    code = "probe_too_soon"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, retry_after=retry_after)


@dataclass
class SweepReport:
    """What one sweep did. ``skipped`` names why it did nothing, if it did nothing."""

    skipped: str = ""
    subscriptions: int = 0
    due: int = 0
    probed: int = 0
    busy: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


def _inflight_marker(subscription_id: int) -> str:
    return f"probe:{subscription_id}"


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _probe_all(
    subscriptions: Sequence[Subscription], *, now: datetime, concurrency: int, timeout: float
) -> tuple[dict[int, Reading], int]:
    """Probe each subscription whose single-flight marker we claim; returns (readings, busy).

    A marker held elsewhere, or a store we cannot reach, means "do not probe": two
    probers can then never spend one credential's quota twice. Markers stay claimed
    until the caller has stored the readings and released them.
    """
    workers = max(1, min(concurrency, len(subscriptions)))
    # A claim must outlive the slowest possible sweep (every probe timing out), so it
    # cannot lapse before the readings are stored; the sample interval caps what a
    # crashed sweep can hold.
    rounds = math.ceil(len(subscriptions) / workers)
    ttl = min(
        rounds * math.ceil(timeout) + INFLIGHT_GRACE_SECONDS,
        max(settings.TRINITY_HEADROOM_SAMPLE_SECONDS, math.ceil(timeout) + INFLIGHT_GRACE_SECONDS),
    )

    def probe_one(subscription: Subscription) -> tuple[int, Reading | None]:
        if not marker_claim(_inflight_marker(subscription.pk), ttl=ttl):
            return subscription.pk, None
        try:
            reading = collectors.collect(
                provider=subscription.provider,
                token=subscription.token,
                client=client,
                now=now,
                label=subscription.name,
            )
        except Exception:  # one broken collector must not end the sweep
            logger.exception("headroom probe of %s failed", subscription.name)
            reading = Reading(fetched_at=now, status=ReadingStatus.ERROR, detail="collector failed")
        finally:
            # The embedded cache is a database table: a probe thread may have opened a
            # connection, which would otherwise outlive the pool.
            connections.close_all()
        return subscription.pk, reading

    readings: dict[int, Reading] = {}
    busy = 0
    with (
        collectors.http_client(timeout=timeout, max_connections=workers) as client,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="headroom-probe") as pool,
    ):
        for pk, reading in pool.map(probe_one, subscriptions):
            if reading is None:
                busy += 1
            else:
                readings[pk] = reading
    return readings, busy


@transaction.atomic
def headroom_readings_record(
    *,
    readings: Mapping[int, Reading],
    previous: Snapshots,
    names: Mapping[int, str],
    now: datetime,
) -> None:
    """Store the readings as snapshots, add history rows, and alert after the commit.

    An ``error`` reading never replaces an answered one in the store: the answer
    stays evidence until it goes stale, and a limited reading keeps the reset a
    readmission needs. Every reading, errors too, becomes a history row.
    """
    keep = {
        pk: reading
        for pk, reading in readings.items()
        if reading.answered or (prior := previous.get(pk)) is None or not prior.answered
    }
    snapshots_write(keep)
    HeadroomSample.objects.bulk_create(
        [
            HeadroomSample(
                subscription_id=pk,
                fetched_at=reading.fetched_at,
                status=reading.status.value,
                source=reading.source,
                detail=reading.detail[:200],
                five_hour=reading.utilization("five_hour"),
                seven_day=reading.utilization("seven_day"),
                windows={name: window_to_json(w) for name, w in reading.windows.items()},
            )
            for pk, reading in readings.items()
        ],
        batch_size=_CHUNK,
    )
    threshold = system_settings_get().headroom_alert_threshold
    if threshold:
        transaction.on_commit(
            lambda: alerts.headroom_alerts_send(
                readings=readings, names=names, threshold=threshold, now=now
            )
        )


def headroom_sweep(*, now: datetime) -> SweepReport:
    """Probe every subscription whose reading is due. Never raises for a store outage.

    Does nothing when auto-refresh is off, when another sweep holds the leader
    marker, or when the store is unreachable (readings could not be stored, and
    the markers that prevent double probes could not be claimed).
    """
    if not system_settings_get().subscription_headroom_auto_refresh:
        return SweepReport(skipped="auto_refresh_off")
    token = secrets.token_hex(8)
    # The lock outlives a crashed sweep by at most one period; a sweep that overruns
    # it is still safe, because each probe is single-flight.
    claimed = marker_claim(LEADER_MARKER, ttl=settings.TRINITY_HEADROOM_SAMPLE_SECONDS, value=token)
    if claimed is None:
        return SweepReport(skipped="store_unreachable")
    if not claimed:
        return SweepReport(skipped="leader_held")
    try:
        return _sweep(now=now)
    finally:
        marker_release(LEADER_MARKER, value=token)


def _sweep(*, now: datetime) -> SweepReport:
    rows = list(
        Subscription.objects.order_by("pk")
        .annotate(last_failure_at=last_failure_subquery(now))
        .values_list("pk", "last_failure_at")
    )
    report = SweepReport(subscriptions=len(rows))
    snapshots = snapshots_read(pk for pk, _ in rows)
    if not snapshots.reachable:
        report.skipped = "store_unreachable"
        return report
    interval = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
    limited_interval = timedelta(seconds=settings.TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS)
    due_ids = [
        pk
        for pk, last_failure_at in rows
        if probe_due(
            snapshots.get(pk),
            now=now,
            interval=interval,
            limited_interval=limited_interval,
            last_failure_at=last_failure_at,
        )
    ]
    report.due = len(due_ids)
    if not due_ids:
        return report
    due = _load(due_ids)
    readings, report.busy = _probe_all(
        due,
        now=now,
        concurrency=settings.TRINITY_HEADROOM_CONCURRENCY,
        timeout=settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS,
    )
    try:
        headroom_readings_record(
            readings=readings, previous=snapshots, names={s.pk: s.name for s in due}, now=now
        )
    finally:
        markers_release(_inflight_marker(pk) for pk in readings)
    report.probed = len(readings)
    report.statuses = dict(Counter(r.status.value for r in readings.values()))
    logger.info(
        "headroom sweep: %d due, %d probed, %d busy elsewhere, %s",
        report.due,
        report.probed,
        report.busy,
        report.statuses,
    )
    return report


def _load(ids: Sequence[int]) -> list[Subscription]:
    found: list[Subscription] = []
    for chunk in _chunks(ids):
        found.extend(
            Subscription.objects.filter(pk__in=chunk).only("pk", "name", "provider", "token")
        )
    return found


def last_probe_at(subscription_id: int) -> datetime | None:
    """When the last probe of the subscription ran, from history (the store may be down)."""
    return (
        HeadroomSample.objects.filter(subscription_id=subscription_id)
        .order_by("-fetched_at")
        .values_list("fetched_at", flat=True)
        .first()
    )


def headroom_refresh(*, subscription: Subscription, now: datetime) -> Reading:
    """Probe ``subscription`` now and record the reading; returns it.

    Raises ProbeTooSoon within the floor after the last probe, or while another
    probe of it is running. With the store unreachable the history still enforces
    the floor and the probe goes ahead: the operator asked for it explicitly.
    """
    floor = settings.TRINITY_HEADROOM_REFRESH_FLOOR_SECONDS
    last = last_probe_at(subscription.pk)
    if last is not None:
        elapsed = (now - last).total_seconds()
        if elapsed < floor:
            wait = max(1, math.ceil(floor - elapsed))
            raise ProbeTooSoon(
                f"Usage was read {max(0, int(elapsed))} s ago; it can be refreshed at most "
                f"once every {floor} s.",
                retry_after=wait,
            )
    timeout = settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS
    claimed = marker_claim(_inflight_marker(subscription.pk), ttl=timeout + INFLIGHT_GRACE_SECONDS)
    if claimed is False:
        raise ProbeTooSoon(
            "A usage probe of this subscription is already running; try again shortly.",
            retry_after=timeout,
        )
    try:
        previous = snapshot_read(subscription.pk)
        with collectors.http_client(timeout=timeout, max_connections=1) as client:
            reading = collectors.collect(
                provider=subscription.provider,
                token=subscription.token,
                client=client,
                now=now,
                label=subscription.name,
            )
        headroom_readings_record(
            readings={subscription.pk: reading},
            previous=previous,
            names={subscription.pk: subscription.name},
            now=now,
        )
    finally:
        if claimed:
            marker_release(_inflight_marker(subscription.pk))
    return reading


@transaction.atomic
def headroom_history_prune(*, now: datetime) -> int:
    """Delete history older than TRINITY_HEADROOM_HISTORY_DAYS; returns how many rows."""
    cutoff = now - timedelta(days=settings.TRINITY_HEADROOM_HISTORY_DAYS)
    deleted, _ = HeadroomSample.objects.filter(fetched_at__lt=cutoff).delete()
    return deleted
