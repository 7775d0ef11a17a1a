"""The exhaustion forecast's I/O: computed from history where the sampler stores a
reading, kept in the cache beside the snapshot, read for the panel.

The rules are ``exhaustion_forecast.py``'s. A turn never computes a forecast: it reads the stored
one with its snapshot (``store.turn_evidence_read``), so the hot path gains no query.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache

from routing.headroom.exhaustion_forecast import (
    LOOKBACK,
    Forecast,
    UsagePoint,
    forecast_compute,
    forecast_current,
    forecast_from_json,
    forecast_key,
    forecast_to_json,
)
from routing.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading, ReadingStatus
from subscriptions.models import HeadroomSample
from trinity.markers import STORE_ERRORS

logger = logging.getLogger(__name__)


def usage_history(
    subscription_ids: Iterable[int], *, now: datetime
) -> dict[int, dict[str, list[UsagePoint]]]:
    """Each subscription's utilization points per window over the last ``LOOKBACK``,
    from history rows that carry an answer (one query for all of them)."""
    wanted = list(subscription_ids)
    rows = (
        HeadroomSample.objects.filter(
            subscription_id__in=wanted, fetched_at__gte=now - LOOKBACK, fetched_at__lte=now
        )
        .exclude(status=ReadingStatus.ERROR.value)
        .values_list("subscription_id", "fetched_at", "windows", "five_hour", "seven_day")
    )
    history: dict[int, dict[str, list[UsagePoint]]] = defaultdict(lambda: defaultdict(list))
    for pk, at, windows, five_hour, seven_day in rows:
        # Rows written before windows were kept in JSON still have the two columns.
        figures = {FIVE_HOUR: five_hour, SEVEN_DAY: seven_day}
        for name, window in (windows or {}).items():
            if isinstance(window, dict):
                figures[name] = window.get("utilization")
        for name, value in figures.items():
            if isinstance(value, int | float):
                history[pk][name].append(UsagePoint(at, float(value)))
    return history


def headroom_forecasts_update(
    *, readings: Mapping[int, Reading], now: datetime
) -> dict[int, Forecast]:
    """Compute and store the forecast of every subscription with an answered reading.

    Runs after the readings' history rows are written (so the newest point counts);
    each window's current reset comes from its reading. An ``error`` reading leaves
    the stored forecast alone, as it leaves the snapshot. A forecast with no window
    is stored too: it replaces an older one that no longer holds. Returns what it
    computed; a store outage only costs the forecast (logged).
    """
    answered = {pk: r for pk, r in readings.items() if r.answered}
    if not answered:
        return {}
    latest = max(now, *(r.fetched_at for r in answered.values()))
    history = usage_history(answered, now=latest)
    forecasts = {
        pk: forecast_compute(
            history.get(pk, {}),
            resets={name: w.resets_at for name, w in reading.windows.items()},
            now=reading.fetched_at,
        )
        for pk, reading in answered.items()
    }
    try:
        cache.set_many(
            {forecast_key(pk): forecast_to_json(f) for pk, f in forecasts.items()},
            # A forecast is evidence exactly as long as the reading it came from.
            timeout=settings.TRINITY_HEADROOM_FRESH_SECONDS,
        )
    except STORE_ERRORS:
        logger.warning("headroom store unreachable: %d forecasts not stored", len(forecasts))
    return forecasts


def headroom_forecasts_read(subscription_ids: Iterable[int]) -> dict[int, Forecast]:
    """The stored forecasts of ``subscription_ids`` in one round trip; never raises.

    A subscription without one (none stored, malformed, or the store unreachable) is
    absent: no forecast is shown and none routes a turn.
    """
    keys = {forecast_key(pk): pk for pk in subscription_ids}
    if not keys:
        return {}
    try:
        raw = cache.get_many(list(keys))
    except STORE_ERRORS:
        logger.warning("headroom store unreachable: %d forecasts unread", len(keys))
        return {}
    found: dict[int, Forecast] = {}
    for key, value in raw.items():
        try:
            found[keys[key]] = forecast_from_json(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            logger.warning("headroom store: discarding a malformed forecast (%s)", key)
    return found


def headroom_forecasts_get(
    subscription_ids: Iterable[int], *, now: datetime
) -> dict[int, Forecast]:
    """The forecasts that still hold at ``now`` (for the panel), in one round trip:
    one older than the readings' freshness limit is dropped, and so is a window that
    has reset since."""
    max_age = timedelta(seconds=settings.TRINITY_HEADROOM_FRESH_SECONDS)
    found = {}
    for pk, forecast in headroom_forecasts_read(subscription_ids).items():
        current = forecast_current(forecast, now=now, max_age=max_age)
        if current is not None:
            found[pk] = current
    return found
