"""What the forwarder saw of the provider's answers on one grant: no credential in it.

A CLI words an upstream refusal as UI copy ("You’ve hit your usage limit. Try again
later.") and drops what classifies it exactly: the status, the error type or code,
the usage limit's reset. The forwarder keeps those from the answer itself, bounded
and redacted, so the runtime classifies from the provider's own words first and the
CLI's sentence only as a fallback. Pure: parsing only, no I/O.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

# Enough for any provider error body; a larger one is cut (it is no refusal we read).
MAX_REFUSAL_BYTES: Final = 8 * 1024
MESSAGE_CHARS: Final = 300
RATELIMIT_PREFIXES: Final = ("anthropic-ratelimit-unified-", "x-codex-")
# Headers of a refusal kept beside its body: the rate-limit family and the retry hint.
_REFUSAL_HEADERS: Final = ("retry-after",)


@dataclass(frozen=True)
class UpstreamRefusal:
    """One error answer (status >= 400) the provider sent, as far as it classifies.

    `message` is bounded and redacted; `resets_in_seconds`/`resets_at` are the
    usage limit's own figures (the Codex backend sends them on `usage_limit_reached`),
    `received_at` the instant the forwarder relayed it, so a relative reset is exact.
    """

    status: int
    received_at: datetime
    error_type: str | None = None
    error_code: str | None = None
    message: str = ""
    resets_in_seconds: float | None = None
    resets_at: datetime | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def reset(self) -> datetime | None:
        """The absolute reset the answer carried (`resets_at` beats the relative one)."""
        if self.resets_at is not None:
            return self.resets_at
        if self.resets_in_seconds is not None:
            return self.received_at + timedelta(seconds=self.resets_in_seconds)
        return None


@dataclass
class UpstreamSeen:
    """The rate-limit headers of the latest answer and the latest refusal on a grant."""

    ratelimit: dict[str, str] = field(default_factory=dict)
    refusal: UpstreamRefusal | None = None
    requests: int = 0


def ratelimit_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The provider's rate-limit headers (lower-case names, values as sent)."""
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower().startswith(RATELIMIT_PREFIXES)
    }


def parse_refusal(
    *,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    received_at: datetime,
    redact: Callable[[str], str],
) -> UpstreamRefusal:
    """The refusal an error answer is: its JSON error fields when it has them, else
    its text as the message. Never raises: an unreadable body is a bare status."""
    payload = _json_body(body, headers.get("content-encoding", ""))
    error: Any = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        # The ChatGPT backend answers some refusals as {"detail": ...}.
        detail = payload.get("detail") if isinstance(payload, dict) else None
        error = {"message": detail} if isinstance(detail, str) else {}
    message = error.get("message")
    if not isinstance(message, str):
        message = "" if payload is not None else body[:MESSAGE_CHARS].decode("utf-8", "replace")
    kept = ratelimit_headers(headers)
    kept.update({name: headers[name] for name in _REFUSAL_HEADERS if name in headers})
    return UpstreamRefusal(
        status=status,
        received_at=received_at,
        error_type=_word(error.get("type")),
        error_code=_word(error.get("code")),
        message=redact(message[:MESSAGE_CHARS]),
        resets_in_seconds=_seconds(error.get("resets_in_seconds")),
        resets_at=_instant(error.get("resets_at")),
        headers=kept,
    )


def _json_body(body: bytes, encoding: str) -> Any:
    raw = body
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "deflate"):
        try:
            raw = gzip.decompress(body) if encoding == "gzip" else zlib.decompress(body)
        except (OSError, EOFError, zlib.error):
            return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _word(value: object) -> str | None:
    return value[:80] if isinstance(value, str) and value else None


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _instant(value: object) -> datetime | None:
    """`resets_at` as unix seconds (the Codex backend's form) or ISO-8601 with a zone."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else None
    return None
