"""Anthropic plan usage: the OAuth usage endpoint when the token may read it, else a probe.

The usage endpoint costs no quota but needs the ``user:profile`` scope, which tokens
from ``claude setup-token`` lack: a 403 (or any other non-answer but a 401) falls back
to the probe, a 1-token request on the cheapest model whose
``anthropic-ratelimit-unified-*`` headers describe every window.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings

from routing.headroom.reading import (
    CORE_WINDOWS,
    REJECTED,
    Reading,
    ReadingStatus,
    WindowReading,
)
from subscriptions.headroom.collectors.common import (
    Collected,
    drift,
    from_iso,
    from_unix,
    http_failure,
    logger,
    percent,
    retry_after,
    transport_failure,
    usage_throttled,
    window_status,
)
from trinity.crypto import Secret

USAGE_PATH = "/api/oauth/usage"
PROBE_PATH = "/v1/messages"
OAUTH_BETA = "oauth-2025-04-20"
API_VERSION = "2023-06-01"
UNIFIED = "anthropic-ratelimit-unified-"
_UTILIZATION_HEADER = re.compile(
    r"^anthropic-ratelimit-unified-(?P<suffix>[a-z0-9_]+)-utilization$"
)
_USAGE_WINDOW = re.compile(r"^(five_hour|seven_day(_[a-z0-9]+)?)$")


def _headers(token: Secret) -> dict[str, str]:
    return {
        # The one place the plaintext leaves memory: on the wire to the provider.
        "authorization": f"Bearer {token.reveal()}",
        "anthropic-beta": OAUTH_BETA,
        "anthropic-version": API_VERSION,
    }


def _window_name(suffix: str) -> str | None:
    """Header suffixes name windows by length: ``5h``, ``7d``, ``7d_sonnet``..."""
    if suffix == "5h":
        return "five_hour"
    if suffix == "7d":
        return "seven_day"
    if suffix.startswith("7d_"):
        return "seven_day_" + suffix[3:]
    return None


def parse_unified_headers(headers: httpx.Headers) -> dict[str, WindowReading]:
    """Every window the unified headers describe; fractions become percent."""
    windows: dict[str, WindowReading] = {}
    for key in headers.keys():
        match = _UTILIZATION_HEADER.match(key.lower())
        if match is None:
            continue
        suffix = match.group("suffix")
        name = _window_name(suffix)
        if name is None:
            logger.info("headroom: ignoring unknown unified window %r", suffix)
            continue
        windows[name] = WindowReading(
            utilization=percent(headers.get(key), scale=100),
            resets_at=from_unix(headers.get(f"{UNIFIED}{suffix}-reset")),
            status=headers.get(f"{UNIFIED}{suffix}-status"),
        )
    return windows


def _refusal_lifts_at(response: httpx.Response, now: datetime) -> datetime | None:
    reset = from_unix(response.headers.get(UNIFIED + "reset"))
    if reset is not None:
        return reset
    retry_after = response.headers.get("retry-after", "")
    if retry_after.isdigit():
        return now + timedelta(seconds=int(retry_after))
    return None


def probe(*, token: Secret, client: httpx.Client, now: datetime, label: str = "") -> Reading:
    """POST a 1-token request and read the unified headers; the body is ignored."""
    body: dict[str, Any] = {
        "model": settings.TRINITY_HEADROOM_PROBE_MODEL,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "."}],
    }
    url = settings.TRINITY_ANTHROPIC_BASE_URL + PROBE_PATH
    try:
        response = client.post(url, headers=_headers(token), json=body)
    except httpx.HTTPError as exc:
        return transport_failure(exc, now=now, source="probe", label=label)
    code = response.status_code
    if code in (401, 403):
        return Reading(
            fetched_at=now,
            status=ReadingStatus.INVALID_TOKEN,
            source="probe",
            detail=f"HTTP {code}",
        )
    windows = parse_unified_headers(response.headers)
    claim = response.headers.get(UNIFIED + "representative-claim")
    overage = response.headers.get(UNIFIED + "overage-status")
    if code == 429:
        return Reading(
            fetched_at=now,
            status=ReadingStatus.RATE_LIMITED,
            windows=windows,
            source="probe",
            reset_at=_refusal_lifts_at(response, now),
            representative_claim=claim,
            overage_status=overage,
            detail="HTTP 429",
        )
    if code != 200:
        return http_failure(code, now=now, source="probe", label=label)
    reading = served_reading(response.headers, now=now, source="probe")
    if reading is None:
        return drift("200 without unified rate-limit headers", now=now, source="probe", label=label)
    return reading


def served_reading(headers: httpx.Headers, *, now: datetime, source: str) -> Reading | None:
    """The reading the unified headers of a 200 answer give, or None without them.

    The probe's own answer and every answer the agent servers' forwarders relay for
    a served turn are read here, so both write the same reading for the same headers.
    """
    windows = parse_unified_headers(headers)
    if not windows:
        return None
    return Reading(
        fetched_at=now,
        status=ReadingStatus.OK,
        windows=windows,
        source=source,
        representative_claim=headers.get(UNIFIED + "representative-claim"),
        overage_status=headers.get(UNIFIED + "overage-status"),
    )


def parse_usage_body(body: Any, *, now: datetime) -> Reading | None:
    """A reading from the usage endpoint's JSON, or None if it is not the known shape.

    The endpoint reports figures only; a window at 100% or more is taken as
    ``rejected`` (that is when the provider starts refusing), anything below as
    ``allowed``.
    """
    if not isinstance(body, dict):
        return None
    windows: dict[str, WindowReading] = {}
    for name, value in body.items():
        if not _USAGE_WINDOW.match(name) or not isinstance(value, dict):
            continue
        utilization = percent(value.get("utilization"))
        if utilization is None:
            continue
        status = window_status(value.get("utilization"))
        windows[name] = WindowReading(utilization, from_iso(value.get("resets_at")), status)
    if not windows:
        return None
    blocked = [windows[n] for n in CORE_WINDOWS if n in windows and windows[n].status == REJECTED]
    if blocked:
        resets = [w.resets_at for w in blocked if w.resets_at is not None]
        return Reading(
            fetched_at=now,
            status=ReadingStatus.RATE_LIMITED,
            windows=windows,
            source="usage",
            reset_at=max(resets) if resets else None,
        )
    return Reading(fetched_at=now, status=ReadingStatus.OK, windows=windows, source="usage")


def read(*, token: Secret, client: httpx.Client, now: datetime, label: str = "") -> Collected:
    """The usage endpoint's reading, or the probe's when the endpoint will not answer.

    A 401 is final (the token is refused); a network failure is final too (a probe
    would fail the same way, doubling the wait). So is a 429 with a Retry-After: the
    endpoint rate-limits per account and said when to come back, and the probe would
    spend quota to learn what waiting costs nothing.
    """
    url = settings.TRINITY_ANTHROPIC_BASE_URL + USAGE_PATH
    try:
        response = client.get(url, headers=_headers(token))
    except httpx.HTTPError as exc:
        return Collected(transport_failure(exc, now=now, source="usage", label=label))
    if response.status_code == 401:
        return Collected(
            Reading(
                fetched_at=now,
                status=ReadingStatus.INVALID_TOKEN,
                source="usage",
                detail="HTTP 401",
            )
        )
    if response.status_code == 429 and (retry_at := retry_after(response, now=now)) is not None:
        return usage_throttled(retry_at=retry_at, now=now, source="usage", label=label)
    if response.status_code == 200:
        try:
            payload = response.json()
        except ValueError:
            payload = None
        reading = parse_usage_body(payload, now=now)
        if reading is not None:
            return Collected(reading)
        logger.warning("headroom: usage endpoint answered an unknown shape for %s", label or "?")
    return Collected(probe(token=token, client=client, now=now, label=label))
