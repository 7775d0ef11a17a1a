"""The direct Messages-API runtime's refusals: what it reads from the provider's
answer (status, reset header, representative claim) and passes on in the contract."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from agent_server.runtimes.anthropic_api import _refusal

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
RESET = int(datetime(2026, 5, 4, 9, 0, tzinfo=UTC).timestamp())
PREFIX = "anthropic-ratelimit-unified-"
ERROR = {"type": "error", "error": {"type": "rate_limit_error", "message": "limited"}}


@pytest.mark.parametrize(
    ("status", "headers", "code", "resets_at", "window"),
    [
        # a plan-exhaustion 429: the unified headers name the window and its reset
        (
            429,
            {f"{PREFIX}representative-claim": "seven_day_sonnet", f"{PREFIX}reset": str(RESET)},
            "rate_limit",
            datetime(2026, 5, 4, 9, 0, tzinfo=UTC),
            "seven_day_sonnet",
        ),
        (
            429,
            {f"{PREFIX}representative-claim": " five_hour ", f"{PREFIX}reset": str(RESET)},
            "rate_limit",
            datetime(2026, 5, 4, 9, 0, tzinfo=UTC),
            "five_hour",
        ),
        # a throttle: a 429 with no unified headers carries neither
        (429, {"x-should-retry": "true"}, "rate_limit", None, None),
        # only a rate limit names a window
        (401, {f"{PREFIX}representative-claim": "five_hour"}, "auth", None, None),
    ],
)
def test_a_refusal_passes_on_the_reset_and_the_representative_claim(
    status: int,
    headers: dict[str, str],
    code: str,
    resets_at: datetime | None,
    window: str | None,
) -> None:
    error = _refusal(httpx.Response(status, json=ERROR, headers=headers), lambda: NOW)
    assert (error.error_code, error.resets_at, error.limiting_window) == (code, resets_at, window)
