"""Small parsing helpers the provider collectors share."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx

from subscriptions.headroom.reading import Reading, ReadingStatus

logger = logging.getLogger("subscriptions.headroom.collectors")


def percent(value: object, *, scale: float = 1.0) -> float | None:
    """A utilization as percent with one decimal, or None if it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return round(float(value) * scale, 1)
    except ValueError:
        return None


def from_unix(value: object) -> datetime | None:
    """Unix seconds (number or numeric string) as an aware UTC datetime, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def from_iso(value: object) -> datetime | None:
    """An ISO-8601 instant with a timezone, or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def transport_failure(exc: httpx.HTTPError, *, now: datetime, source: str, label: str) -> Reading:
    """An ``error`` reading for a probe that got no answer. Names the failure, not the request."""
    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "unreachable"
    logger.warning("headroom probe of %s: %s (%s)", label or "?", kind, type(exc).__name__)
    return Reading(fetched_at=now, status=ReadingStatus.ERROR, source=source, detail=kind)


def http_failure(status_code: int, *, now: datetime, source: str, label: str) -> Reading:
    logger.warning("headroom probe of %s: HTTP %d", label or "?", status_code)
    return Reading(
        fetched_at=now, status=ReadingStatus.ERROR, source=source, detail=f"HTTP {status_code}"
    )


def drift(what: str, *, now: datetime, source: str, label: str) -> Reading:
    """The provider answered in a shape we do not know: an ``error``, logged as drift."""
    logger.warning("headroom probe of %s: provider drift: %s", label or "?", what)
    return Reading(
        fetched_at=now, status=ReadingStatus.ERROR, source=source, detail=f"provider drift: {what}"
    )
