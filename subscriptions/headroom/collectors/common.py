"""Small parsing helpers the provider collectors share."""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import NamedTuple

import httpx

from routing.headroom.reading import ALLOWED, REJECTED, Reading, ReadingStatus

logger = logging.getLogger("subscriptions.headroom.collectors")

# A Retry-After is the provider's hint; past an hour the reading would be stale anyway,
# so a longer one (or a typo in it) cannot silence a subscription for a day.
MAX_RETRY_AFTER = timedelta(hours=1)


class Collected(NamedTuple):
    """One probe's outcome: the reading, and when the usage endpoint said it may be
    called again for this credential (None: no such request)."""

    reading: Reading
    retry_at: datetime | None = None


def retry_after(response: httpx.Response, *, now: datetime) -> datetime | None:
    """The instant a ``Retry-After`` (seconds or an HTTP date) names, capped at
    MAX_RETRY_AFTER from ``now``; None when absent, unreadable or already past."""
    raw = response.headers.get("retry-after", "").strip()
    at: datetime | None
    if raw.isdigit():
        at = now + timedelta(seconds=int(raw))
    else:
        try:
            at = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if at.tzinfo is None:
            return None
    if at <= now:
        return None
    return min(at, now + MAX_RETRY_AFTER)


def usage_throttled(*, retry_at: datetime, now: datetime, source: str, label: str) -> Collected:
    """The usage endpoint rate-limits this account: an ``error`` (it says nothing about
    quota) that carries when to ask again."""
    wait = int((retry_at - now).total_seconds())
    logger.warning("headroom probe of %s: usage endpoint rate-limited for %d s", label or "?", wait)
    reading = Reading(
        fetched_at=now, status=ReadingStatus.ERROR, source=source, detail="usage rate-limited"
    )
    return Collected(reading, retry_at)


# The utilization a reading keeps: a provider reports an overdrawn window past 100
# (``1.0100`` in the headers, ``101`` from the usage endpoint), but a window cannot be
# more than spent; every view (API, history, pressure, alerts, status, panel) reads the
# reading, so the clamp is made once, here, where the reading is made.
FULL = 100.0


def percent(value: object, *, scale: float = 1.0) -> float | None:
    """A utilization as percent with one decimal, clamped to [0, 100] (at or over 100
    is exhausted), or None if it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        figure = round(float(value) * scale, 1)
    except (ValueError, OverflowError):  # not a number, or infinite
        return None
    if not math.isfinite(figure):
        return None
    return min(FULL, max(0.0, figure))


def window_status(value: object, *, scale: float = 1.0) -> str:
    """``rejected`` when a reported utilization is at or over 100 % before any rounding,
    else ``allowed``.

    ``percent`` keeps one decimal, so a window at 99.96 % reads 100.0; the provider
    still serves it (it refuses only once a window has used all of it), so the status
    is judged on the figure as reported, not on the rounded one. A plan that reads
    100 % only by rounding stays a candidate for one more request.
    """
    try:
        figure = float(value) * scale  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return ALLOWED
    return REJECTED if figure >= FULL else ALLOWED


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
