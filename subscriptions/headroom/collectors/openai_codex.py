"""ChatGPT/Codex plan usage: GET wham/usage.

Windows are named by their duration (5 hours → ``five_hour``, a week →
``seven_day``), never by ``primary``/``secondary``: which one is primary is the
provider's choice and has changed before.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx
from django.conf import settings

from routing.headroom.reading import (
    REJECTED,
    Reading,
    ReadingStatus,
    WindowReading,
)
from subscriptions.codex_refresh import codex_tokens
from subscriptions.headroom.collectors.common import (
    Collected,
    drift,
    from_unix,
    http_failure,
    percent,
    retry_after,
    transport_failure,
    usage_throttled,
    window_status,
)
from trinity.crypto import Secret
from trinity_contract.codex import window_name

USAGE_PATH = "/backend-api/wham/usage"
SOURCE = "codex_usage"


def _window_name(seconds: object) -> str | None:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return window_name(int(seconds))


HEADER_PREFIX = "x-codex-"
HEADER_WINDOWS = ("primary", "secondary")


def parse_codex_headers(headers: Mapping[str, str], *, now: datetime) -> Reading | None:
    """The reading the ``x-codex-{primary,secondary}-*`` headers of a served answer
    give (used percent, window length in minutes, reset instant), or None without
    them. Named by length like wham/usage's windows (300 min is ``five_hour``), never
    by position."""
    windows: dict[str, WindowReading] = {}
    for position in HEADER_WINDOWS:
        prefix = f"{HEADER_PREFIX}{position}-"
        used = headers.get(prefix + "used-percent")
        minutes = headers.get(prefix + "window-minutes", "")
        utilization = percent(used)
        if utilization is None or not minutes.strip().isdigit():
            continue
        name = _window_name(int(minutes) * 60)
        if name is None:
            continue
        windows[name] = WindowReading(
            utilization, from_unix(headers.get(prefix + "reset-at")), window_status(used)
        )
    if not windows:
        return None
    return Reading(fetched_at=now, status=ReadingStatus.OK, windows=windows, source="turn")


def parse_usage_body(body: Any, *, now: datetime) -> Reading | None:
    """A reading from the wham/usage JSON, or None if it is not the known shape."""
    rate_limit = body.get("rate_limit") if isinstance(body, dict) else None
    if not isinstance(rate_limit, dict):
        return None
    windows: dict[str, WindowReading] = {}
    for key, value in rate_limit.items():
        if not key.endswith("_window") or not isinstance(value, dict):
            continue
        name = _window_name(value.get("limit_window_seconds"))
        utilization = percent(value.get("used_percent"))
        if name is None or utilization is None:
            continue
        status = window_status(value.get("used_percent"))
        windows[name] = WindowReading(utilization, from_unix(value.get("reset_at")), status)
    if not windows:
        return None
    limited = rate_limit.get("limit_reached") is True or rate_limit.get("allowed") is False
    if not limited:
        return Reading(fetched_at=now, status=ReadingStatus.OK, windows=windows, source=SOURCE)
    full = [w for w in windows.values() if w.status == REJECTED] or list(windows.values())
    resets = [w.resets_at for w in full if w.resets_at is not None]
    return Reading(
        fetched_at=now,
        status=ReadingStatus.RATE_LIMITED,
        windows=windows,
        source=SOURCE,
        reset_at=max(resets) if resets else None,
    )


def read(*, token: Secret, client: httpx.Client, now: datetime, label: str = "") -> Collected:
    """The wham/usage reading; a 429 carries its Retry-After, if any, as ``retry_at``.
    ``token``: the stored credential (``codex_credential.py``), refreshed by the caller."""
    url = settings.TRINITY_CODEX_BASE_URL + USAGE_PATH
    credential = codex_tokens(token)
    # The one place the plaintext leaves memory: on the wire to the provider.
    headers = {"authorization": f"Bearer {credential.access_token}"}
    if credential.account_id:
        headers["chatgpt-account-id"] = credential.account_id
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return Collected(transport_failure(exc, now=now, source=SOURCE, label=label))
    code = response.status_code
    if code in (401, 403):
        return Collected(
            Reading(
                fetched_at=now,
                status=ReadingStatus.INVALID_TOKEN,
                source=SOURCE,
                detail=f"HTTP {code}",
            )
        )
    # A 429 here throttles the usage endpoint itself; it says nothing about quota.
    if code == 429 and (retry_at := retry_after(response, now=now)) is not None:
        return usage_throttled(retry_at=retry_at, now=now, source=SOURCE, label=label)
    if code != 200:
        return Collected(http_failure(code, now=now, source=SOURCE, label=label))
    try:
        payload = response.json()
    except ValueError:
        payload = None
    reading = parse_usage_body(payload, now=now)
    if reading is None:
        return Collected(
            drift("wham/usage without rate_limit windows", now=now, source=SOURCE, label=label)
        )
    return Collected(reading)
