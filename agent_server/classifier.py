"""The agent server's classifier: a runtime's refusal (the Claude CLI's result, the
Messages API's answer, or a failed Codex turn with the provider answer the forwarder
kept) into a typed error code and the reset it carried. Pure: no I/O, `now` is
passed in. (What the platform makes of that code is
`routing/attempt_refusal.py`'s question.)

The HTTP status the provider answered (the CLI's `api_error_status`) is read first and
the text second, because the CLI's sentences are UI copy that changes between
versions while the status does not. A process killed by a signal never reaches this
module: a kill says nothing about the credential, so it must never walk the ladder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_server.upstream import UpstreamRefusal
from trinity_contract.codex import window_name
from trinity_contract.errors import ErrorCode
from trinity_contract.refusal_text import BILLING_TEXT, error_code_from_text

# A minute-precision reset printed by the CLI may trail the true instant by up to a
# minute; a reading this close behind `now` is the current window ending, not
# tomorrow's.
_SAME_DAY_TOLERANCE = timedelta(minutes=2)

_RESET_PHRASE = re.compile(
    r"resets\s+"
    r"(?:(?P<month>[A-Za-z]{3,9})\.?\s+(?P<day>\d{1,2}),?\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)"
    r"\s*(?:\((?P<tz>[^)]+)\))?",
    re.IGNORECASE,
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}


@dataclass(frozen=True)
class RuntimeRefusal:
    """The typed error a runtime's refusal is, and the reset it carried (rate limits)."""

    error_code: ErrorCode
    resets_at: datetime | None = None


def classify_runtime_refusal(
    *,
    api_error_status: int | None,
    text: str,
    now: datetime,
    reset_hint: datetime | None = None,
) -> RuntimeRefusal:
    """Return the typed error for a refusal the runtime reported.

    `reset_hint` is a reset instant the caller read from a structured source (the
    `anthropic-ratelimit-unified-reset` header); it beats the CLI's sentence.
    Unrecognised refusals are `upstream_error`, which never walks.
    """
    status = api_error_status
    if status == 429:
        return _rate_limit(text, now, reset_hint)
    if status in (401, 402, 403):
        return RuntimeRefusal("auth")
    if status == 404:
        return RuntimeRefusal("model_unsupported")
    # A 400 covers both "credit balance is too low" (a credential that cannot pay)
    # and plain bad requests, so the text decides (the patterns both sides share);
    # so it does without a status.
    code = error_code_from_text(text)
    if code == "rate_limit":
        return _rate_limit(text, now, reset_hint)
    return RuntimeRefusal(code)


def _rate_limit(text: str, now: datetime, reset_hint: datetime | None) -> RuntimeRefusal:
    resets_at = reset_hint if reset_hint is not None else parse_reset_phrase(text, now=now)
    return RuntimeRefusal("rate_limit", resets_at.astimezone(UTC) if resets_at else None)


def parse_reset_phrase(text: str, *, now: datetime) -> datetime | None:
    """Parse the CLI's "resets 4:10am (UTC)" / "resets Dec 3, 3:25am (UTC)" into UTC.

    Returns None when there is no phrase, no time zone, or an unknown one: a guessed
    reset is worse than none, because the control plane would readmit on it.
    A time without a date is the next occurrence at or after `now` (within a small
    tolerance); a date without a year is the occurrence nearest to `now`.
    """
    match = _RESET_PHRASE.search(text)
    if match is None or not match["tz"]:
        return None
    try:
        zone = ZoneInfo(match["tz"].strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None
    hour = int(match["hour"])
    minute = int(match["minute"] or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if match["ampm"].lower().startswith("p") else 0)
    wall = time(hour, minute)
    local_now = now.astimezone(zone)

    if match["month"]:
        month = _MONTHS.get(match["month"][:3].lower())
        if month is None:
            return None
        candidates = []
        for year in (local_now.year - 1, local_now.year, local_now.year + 1):
            try:
                candidates.append(
                    datetime.combine(date(year, month, int(match["day"])), wall, zone)
                )
            except ValueError:
                continue
        if not candidates:
            return None
        best = min(candidates, key=lambda candidate: abs(candidate - now))
        return best.astimezone(UTC)

    today = datetime.combine(local_now.date(), wall, zone)
    if today < now - _SAME_DAY_TOLERANCE:
        today = datetime.combine(local_now.date() + timedelta(days=1), wall, zone)
    return today.astimezone(UTC)


def parse_unified_reset(value: str | None) -> datetime | None:
    """Parse `anthropic-ratelimit-unified-reset` (unix seconds; ISO-8601 accepted) to UTC."""
    if not value:
        return None
    value = value.strip()
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


# --- the Codex CLI ----------------------------------------------------------------

# Refusals of a credential that cannot pay: the trail calls them billing.
_CODEX_BILLING: Final = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_CODEX_MODEL: Final = re.compile(
    r"model .*(?:not supported|does not exist|not found)|model_not_found|unsupported model",
    re.IGNORECASE,
)
_CLI_STATUS: Final = re.compile(r"unexpected status (\d{3})\b")


@dataclass(frozen=True)
class CodexRefusal:
    """A Codex turn's refusal: its code, the reset and limiting window (rate limits),
    and `upstream_said`, the provider's own words to add to the detail (the CLI's
    sentence drops them: "billing", the error code)."""

    error_code: ErrorCode
    resets_at: datetime | None = None
    limiting_window: str | None = None
    upstream_said: str = ""


def codex_limiting_window(headers: Mapping[str, str], resets_at: datetime | None) -> str | None:
    """The window a usage limit names, from the answer's `x-codex-*-window-minutes`:
    the exhausted one whose reset is the refusal's, else the exhausted one that
    resets last (nothing serves before then). None when no header says."""
    exhausted: list[tuple[float, str]] = []
    for name, value in headers.items():
        if not (name.startswith("x-codex-") and name.endswith("-used-percent")):
            continue
        family = name[: -len("used-percent")]
        minutes, used = _number(headers.get(family + "window-minutes")), _number(value)
        if minutes is None or used is None or used < 100:
            continue
        reset = _number(headers.get(family + "reset-at")) or 0.0
        if resets_at is not None and int(reset) == int(resets_at.timestamp()):
            return window_name(int(minutes * 60))
        exhausted.append((reset, window_name(int(minutes * 60))))
    return max(exhausted)[1] if exhausted else None


def classify_codex_refusal(
    *, refusal: UpstreamRefusal | None, text: str, now: datetime
) -> CodexRefusal:
    """The typed error of a failed Codex turn: from the provider's answer the
    forwarder kept when there is one (exact), else from the CLI's sentence."""
    if refusal is None:
        return _codex_from_text(text, now)
    words = {refusal.error_type, refusal.error_code} - {None}
    said = _upstream_said(refusal)
    if words & _CODEX_BILLING or refusal.status == 402:
        return CodexRefusal("auth", upstream_said=said)
    if refusal.status == 429:
        if "usage_not_included" in words:  # the plan does not include Codex at all
            return CodexRefusal("auth", upstream_said=said)
        if "usage_limit_reached" not in words:
            # A throttle: no reset, no window; the platform backs off briefly.
            return CodexRefusal("rate_limit", upstream_said=said)
        resets_at = refusal.reset
        window = codex_limiting_window(refusal.headers, resets_at)
        return CodexRefusal("rate_limit", resets_at, window, said)
    if refusal.status in (401, 403):
        return CodexRefusal("auth", upstream_said=said)
    if refusal.status == 404 or _CODEX_MODEL.search(f"{refusal.error_code} {refusal.message}"):
        return CodexRefusal("model_unsupported", upstream_said=said)
    if refusal.status >= 500:
        return CodexRefusal("upstream_error", upstream_said=said)
    return replace(_codex_from_text(f"{text} {refusal.message}", now), upstream_said=said)


def _codex_from_text(text: str, now: datetime) -> CodexRefusal:
    """The fallback: a status the CLI printed ("unexpected status 401 …"), else the
    shared patterns (a billing word first: "Quota exceeded. Check your plan and
    billing details." is a key without credit, not a usage limit)."""
    printed = _CLI_STATUS.search(text)
    if printed is not None:
        code = classify_runtime_refusal(
            api_error_status=int(printed.group(1)), text=text, now=now
        ).error_code
        return CodexRefusal(code)
    if BILLING_TEXT.search(text):
        return CodexRefusal("auth")
    if _CODEX_MODEL.search(text):
        return CodexRefusal("model_unsupported")
    return CodexRefusal(error_code_from_text(text))


def _upstream_said(refusal: UpstreamRefusal) -> str:
    kind = " ".join(dict.fromkeys(w for w in (refusal.error_type, refusal.error_code) if w))
    return (
        f"upstream {refusal.status}"
        + (f" {kind}" if kind else "")
        + (f": {refusal.message}" if refusal.message else "")
    )


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
