"""The sampler: keeps each subscription's reading fresh so no turn ever has to probe.

A beat sweep probes the subscriptions whose reading is due (``probe_cadence.probe_due``),
leader-locked so two beats never double-probe, single-flight per subscription, with
bounded concurrency and a timeout per probe. Each reading is stored the moment its
probe finishes, stamped with that probe's own instant, so a slow provider delays
only its own subscription. ``headroom_refresh`` probes one subscription on demand,
at most once per floor interval. Every TTL and time limit comes from
``sweep_bounds``.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import connections, transaction

from routing.headroom.probe_cadence import probe_due
from routing.headroom.reading import Reading, ReadingStatus, reading_replaces, window_to_json
from subscriptions.claude_refresh import claude_fresh_secret
from subscriptions.codex_refresh import codex_fresh_secret
from subscriptions.headroom import alerts, collectors
from subscriptions.headroom.collectors.common import Collected, from_iso
from subscriptions.headroom.forecast_store import headroom_forecasts_update
from subscriptions.headroom.store import Snapshots, snapshot_read, snapshots_read, snapshots_write
from subscriptions.models import HeadroomSample, Provider, Subscription
from subscriptions.plan_facts import last_failure_subquery
from trinity import metrics
from trinity.errors import DomainError
from trinity.markers import marker_claim, marker_release, marker_set, markers_read
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]

LEADER_MARKER = "sweep-leader"
_CHUNK = 500

# The one bound everything else derives from: how long one probe can hold its claim.
# A probe is at most two requests (the usage endpoint, then the 1-token probe when
# the endpoint will not answer); httpx bounds a request's connect and each of its
# reads by the probe timeout, so a request takes about two timeouts at most (a body
# trickled in byte by byte could take longer: these are a few hundred bytes, and the
# task's time limit stays the backstop); storing the reading and releasing the claim
# gets a few seconds of its own.
REQUESTS_PER_PROBE = 2
TIMED_PHASES_PER_REQUEST = 2
STORE_SECONDS = 5
# How far a marker outlives the work it guards: a live holder never sees it lapse.
GRACE_SECONDS = 5


@dataclass(frozen=True)
class SweepBounds:
    """The sampler's TTLs and time limits, in seconds, all from ``probe``.

    ``probe``: the longest one probe holds its claim. ``claim_ttl``: its
    single-flight marker. ``sweep``: the longest a sweep runs; no probe starts after
    ``starts_until`` (``sweep - probe``), so every probe it starts can finish and be
    stored inside it. ``leader_ttl``: the leader marker, which outlives a live sweep.
    ``soft_time_limit`` / ``time_limit``: the Celery task's, past ``sweep``.
    """

    probe: int
    claim_ttl: int
    sweep: int
    starts_until: int
    leader_ttl: int
    soft_time_limit: int
    time_limit: int


def sweep_bounds(*, timeout: int, interval: int) -> SweepBounds:
    """Derive every bound from the probe timeout and the sample interval."""
    probe = REQUESTS_PER_PROBE * TIMED_PHASES_PER_REQUEST * timeout + STORE_SECONDS
    # A sweep fits in one sample period, so the next beat finds the leader free; only
    # a period too short for two probes in a row stretches it. Plans not started in
    # time stay due and go first to the next sweep's probers.
    sweep = max(interval, 2 * probe)
    return SweepBounds(
        probe=probe,
        claim_ttl=probe + GRACE_SECONDS,
        sweep=sweep,
        starts_until=sweep - probe,
        leader_ttl=sweep + GRACE_SECONDS,
        soft_time_limit=sweep + GRACE_SECONDS,
        time_limit=sweep + 2 * GRACE_SECONDS,
    )


def configured_bounds() -> SweepBounds:
    """``sweep_bounds`` for the configured probe timeout and sample interval."""
    return sweep_bounds(
        timeout=settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS,
        interval=settings.TRINITY_HEADROOM_SAMPLE_SECONDS,
    )


class ProbeTooSoon(DomainError):
    """A probe ran (or is running) too recently; ``retry_after`` says when to ask again."""

    status_code = 429
    code = "probe_too_soon"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, retry_after=retry_after)


@dataclass
class SweepReport:
    """What one sweep did. ``skipped`` names why it did nothing, if it did nothing.

    Of the ``due`` subscriptions: ``probed``; ``busy`` (another prober holds it);
    ``recent`` (another prober probed it moments ago); ``deferred`` (its usage
    endpoint asked to wait); ``late`` (no time left in this sweep to probe it).
    """

    skipped: str = ""
    subscriptions: int = 0
    due: int = 0
    probed: int = 0
    busy: int = 0
    recent: int = 0
    deferred: int = 0
    late: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


def _inflight_marker(subscription_id: int) -> str:
    return f"probe:{subscription_id}"


def _backoff_marker(subscription_id: int) -> str:
    return f"usage-retry-at:{subscription_id}"


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _probed_recently(subscription_id: int, *, now: datetime) -> bool:
    """Whether history shows a probe so recent that no plan would be due again yet.

    The check a prober makes once it holds the claim: another leader may have
    probed this plan after we read our snapshots (its error reading does not replace
    a stored answer, so only history knows). "Recent" is what ``probe_due`` allows
    the most urgent plan, a limited one: ``TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS``
    less its slack.
    """
    last = last_probe_at(subscription_id)
    if last is None:
        return False
    limited = timedelta(seconds=settings.TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS)
    probed = Reading(fetched_at=last, status=ReadingStatus.RATE_LIMITED)
    return not probe_due(probed, now=now, interval=limited, limited_interval=limited)


def _remember_retry_at(subscription_id: int, collected: Collected, *, now: datetime) -> None:
    """Keep the usage endpoint's Retry-After; its TTL only cleans up, the instant decides."""
    if collected.retry_at is None:
        return
    wait = math.ceil((collected.retry_at - now).total_seconds())
    marker_set(
        _backoff_marker(subscription_id),
        value=collected.retry_at.isoformat(),
        ttl=max(1, wait) + GRACE_SECONDS,
    )


def _read_one(subscription: Subscription, *, client: httpx.Client, now: datetime) -> Collected:
    """Read one subscription's usage, timed into the probe metric; never raises.

    A collector that raises becomes an ``error`` reading: in a sweep it must not end
    the sweep, and on a refresh it is a probe like any other (recorded, floored).
    """
    started = time.perf_counter()
    try:
        token = subscription.token
        if subscription.provider == Provider.OPENAI_CODEX:
            token = codex_fresh_secret(subscription, now=now, client=client)
        else:  # a signed-in Claude plan's token is refreshed when due, as a turn's is
            token = claude_fresh_secret(subscription, now=now, client=client) or token
        collected = collectors.read(
            provider=subscription.provider,
            token=token,
            client=client,
            now=now,
            label=subscription.name,
        )
    except Exception:
        logger.exception("headroom probe of %s failed", subscription.name)
        collected = Collected(
            Reading(fetched_at=now, status=ReadingStatus.ERROR, detail="collector failed")
        )
    metrics.probe_observed(
        result=collected.reading.status.value, seconds=time.perf_counter() - started
    )
    return collected


@dataclass(frozen=True)
class _Sweep:
    """What every probe of one sweep shares."""

    clock: Clock
    bounds: SweepBounds
    claim: str  # this sweep's value in the markers it claims
    last_start: datetime
    previous: Snapshots
    retry_at: Mapping[int, datetime]
    threshold: int


def _probe_one(
    subscription: Subscription, *, sweep: _Sweep, client: httpx.Client
) -> tuple[str, str]:
    """Probe, store and release one subscription; returns (outcome, status)."""
    pk = subscription.pk
    try:
        now = sweep.clock()
        if now >= sweep.last_start:
            return "late", ""
        retry_at = sweep.retry_at.get(pk)
        if retry_at is not None and now < retry_at:
            return "deferred", ""
        # A marker held elsewhere, or a store we cannot reach, means "do not probe":
        # two probers can then never spend one credential's quota twice.
        name = _inflight_marker(pk)
        if not marker_claim(name, ttl=sweep.bounds.claim_ttl, value=sweep.claim):
            return "busy", ""
        try:
            if _probed_recently(pk, now=now):
                return "recent", ""
            collected = _read_one(subscription, client=client, now=now)
            _remember_retry_at(pk, collected, now=now)
            headroom_readings_record(
                readings={pk: collected.reading},
                previous=sweep.previous,
                names={pk: subscription.name},
                now=collected.reading.fetched_at,
                threshold=sweep.threshold,
            )
            return "probed", collected.reading.status.value
        finally:
            # Only our own claim: if it lapsed and someone else holds the marker now,
            # theirs stays.
            marker_release(name, value=sweep.claim)
    finally:
        # The embedded cache is a database table and history rows are written here:
        # the thread's connection would otherwise outlive the pool.
        connections.close_all()


@transaction.atomic
def headroom_readings_record(
    *,
    readings: Mapping[int, Reading],
    previous: Snapshots,
    names: Mapping[int, str],
    now: datetime,
    threshold: int | None = None,
) -> None:
    """Store the readings as snapshots, add history rows, and alert after the commit.

    An ``error`` reading never replaces an answered one in the store: the answer
    stays evidence until it goes stale, and a limited reading keeps the reset a
    readmission needs. Every reading, errors too, becomes a history row.
    ``threshold`` is the alert threshold (read from the settings when None).
    """
    keep = {
        pk: reading
        for pk, reading in readings.items()
        if reading_replaces(previous.get(pk), reading)
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
    # After the history rows: the newest reading is the forecast's latest point.
    headroom_forecasts_update(readings=readings, now=now)
    if threshold is None:
        threshold = system_settings_get().headroom_alert_threshold
    if threshold:
        limit = threshold
        transaction.on_commit(
            lambda: alerts.headroom_alerts_send(
                readings=readings, names=names, threshold=limit, now=now
            )
        )


def headroom_sweep(*, clock: Clock) -> SweepReport:
    """Probe every subscription whose reading is due. Never raises for a store outage.

    Does nothing when auto-refresh is off, when another sweep holds the leader
    marker, or when the store is unreachable (readings could not be stored, and
    the markers that prevent double probes could not be claimed). ``clock`` stamps
    each reading and decides when no more probes start.
    """
    if not system_settings_get().subscription_headroom_auto_refresh:
        return SweepReport(skipped="auto_refresh_off")
    bounds = configured_bounds()
    claim = secrets.token_hex(8)
    claimed = marker_claim(LEADER_MARKER, ttl=bounds.leader_ttl, value=claim)
    if claimed is None:
        return SweepReport(skipped="store_unreachable")
    if not claimed:
        return SweepReport(skipped="leader_held")
    try:
        return _sweep(clock=clock, bounds=bounds, claim=claim)
    finally:
        marker_release(LEADER_MARKER, value=claim)


def _due_ids(
    rows: Sequence[tuple[int, datetime | None]], snapshots: Snapshots, *, now: datetime
) -> list[int]:
    """The ids of ``rows`` (id, latest refusal) whose reading is due for a probe."""
    interval = timedelta(seconds=settings.TRINITY_HEADROOM_SAMPLE_SECONDS)
    limited_interval = timedelta(seconds=settings.TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS)
    return [
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


def _probe_all(due: list[Subscription], *, sweep: _Sweep) -> tuple[Counter[str], Counter[str]]:
    """Probe ``due`` on a bounded thread pool; the outcomes and the readings' statuses."""
    workers = max(1, min(settings.TRINITY_HEADROOM_CONCURRENCY, len(due)))
    outcomes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    timeout = settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS
    with (
        collectors.http_client(timeout=timeout, max_connections=workers) as client,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="headroom-probe") as pool,
    ):
        futures = [pool.submit(_probe_one, s, sweep=sweep, client=client) for s in due]
        for future in as_completed(futures):
            outcome, status = future.result()
            outcomes[outcome] += 1
            if status:
                statuses[status] += 1
    return outcomes, statuses


def _sweep(*, clock: Clock, bounds: SweepBounds, claim: str) -> SweepReport:
    started = clock()
    rows = list(
        Subscription.objects.order_by("pk")
        .annotate(last_failure_at=last_failure_subquery(started))
        .values_list("pk", "last_failure_at")
    )
    report = SweepReport(subscriptions=len(rows))
    snapshots = snapshots_read(pk for pk, _ in rows)
    if not snapshots.reachable:
        report.skipped = "store_unreachable"
        return report
    due_ids = _due_ids(rows, snapshots, now=started)
    report.due = len(due_ids)
    if not due_ids:
        return report
    held = markers_read(_backoff_marker(pk) for pk in due_ids)
    if held is None:
        report.skipped = "store_unreachable"
        return report
    retry_at = {
        pk: at for pk in due_ids if (at := from_iso(held.get(_backoff_marker(pk)))) is not None
    }
    sweep = _Sweep(
        clock=clock,
        bounds=bounds,
        claim=claim,
        last_start=started + timedelta(seconds=bounds.starts_until),
        previous=snapshots,
        retry_at=retry_at,
        threshold=system_settings_get().headroom_alert_threshold,
    )
    outcomes, statuses = _probe_all(_load(due_ids), sweep=sweep)
    report.probed = outcomes["probed"]
    report.busy = outcomes["busy"]
    report.recent = outcomes["recent"]
    report.deferred = outcomes["deferred"]
    report.late = outcomes["late"]
    report.statuses = dict(statuses)
    logger.info(
        "headroom sweep: %d due, %d probed, %d busy elsewhere, %d probed moments ago, "
        "%d waiting on Retry-After, %d left for the next sweep, %s",
        report.due,
        report.probed,
        report.busy,
        report.recent,
        report.deferred,
        report.late,
        report.statuses,
    )
    return report


def _load(ids: Sequence[int]) -> list[Subscription]:
    found: list[Subscription] = []
    for chunk in _chunks(ids):
        found.extend(
            Subscription.objects.filter(pk__in=chunk).only(
                "pk", "name", "provider", "token", "token_expires_at"
            )
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

    Raises ProbeTooSoon within the floor after the last probe, while another probe
    of it is running, or before the instant its usage endpoint's Retry-After named.
    With the store unreachable the history still enforces the floor and the probe
    goes ahead: the operator asked for it explicitly. A collector that fails is
    recorded as an ``error`` reading, as in a sweep.
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
    held = markers_read([_backoff_marker(subscription.pk)]) or {}
    retry_at = from_iso(held.get(_backoff_marker(subscription.pk)))
    if retry_at is not None and now < retry_at:
        raise ProbeTooSoon(
            "The provider's usage endpoint asked not to be called again for this subscription yet.",
            retry_after=max(1, math.ceil((retry_at - now).total_seconds())),
        )
    reading = headroom_probe_alone(subscription=subscription, now=now)
    if reading is None:
        raise ProbeTooSoon(
            "A usage probe of this subscription is already running; try again shortly.",
            retry_after=configured_bounds().probe,
        )
    return reading


def headroom_probe_alone(*, subscription: Subscription, now: datetime) -> Reading | None:
    """Probe ``subscription`` now and record the reading, unless another probe of it
    is running (then None). No floor and no Retry-After check: the caller decides
    whether the probe is due. With the store unreachable the probe goes ahead."""
    bounds = configured_bounds()
    claim = secrets.token_hex(8)
    name = _inflight_marker(subscription.pk)
    claimed = marker_claim(name, ttl=bounds.claim_ttl, value=claim)
    if claimed is False:
        return None
    try:
        previous = snapshot_read(subscription.pk)
        timeout = settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS
        with collectors.http_client(timeout=timeout, max_connections=1) as client:
            collected = _read_one(subscription, client=client, now=now)
        _remember_retry_at(subscription.pk, collected, now=now)
        headroom_readings_record(
            readings={subscription.pk: collected.reading},
            previous=previous,
            names={subscription.pk: subscription.name},
            now=now,
        )
    finally:
        if claimed:
            marker_release(name, value=claim)
    return collected.reading


@transaction.atomic
def headroom_history_prune(*, now: datetime) -> int:
    """Delete history older than TRINITY_HEADROOM_HISTORY_DAYS; returns how many rows."""
    cutoff = now - timedelta(days=settings.TRINITY_HEADROOM_HISTORY_DAYS)
    deleted, _ = HeadroomSample.objects.filter(fetched_at__lt=cutoff).delete()
    return deleted
