"""The Codex refusal classifier: the provider's answer the forwarder kept decides, the
CLI's sentence only when there is none. Rows are what the simulator and the real
CLI (0.169.0) produced; the sentences keep the CLI's typographic apostrophe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_server.classifier import classify_codex_refusal, codex_limiting_window
from agent_server.upstream import UpstreamRefusal

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LIMIT_SENTENCE = "You’ve hit your usage limit. Try again later."
FIVE_H = int((NOW + timedelta(hours=2)).timestamp())
SEVEN_D = int((NOW + timedelta(days=3)).timestamp())


def refusal(status: int, **fields: Any) -> UpstreamRefusal:
    return UpstreamRefusal(status=status, received_at=NOW, **fields)


def windows(primary_minutes: int, primary_used: int, secondary_used: int) -> dict[str, str]:
    """x-codex-* headers; which window is primary is the provider's choice."""
    other = 10080 if primary_minutes == 300 else 300
    primary_reset, secondary_reset = (
        (FIVE_H, SEVEN_D) if primary_minutes == 300 else (SEVEN_D, FIVE_H)
    )
    return {
        "x-codex-primary-used-percent": str(primary_used),
        "x-codex-primary-window-minutes": str(primary_minutes),
        "x-codex-primary-reset-at": str(primary_reset),
        "x-codex-secondary-used-percent": str(secondary_used),
        "x-codex-secondary-window-minutes": str(other),
        "x-codex-secondary-reset-at": str(secondary_reset),
    }


@pytest.mark.parametrize(
    ("kept", "text", "code"),
    [
        (
            refusal(429, error_type="usage_limit_reached", resets_in_seconds=60),
            LIMIT_SENTENCE,
            "rate_limit",
        ),
        (
            refusal(429, error_code="rate_limit_exceeded"),
            "exceeded retry limit, last status: 429",
            "rate_limit",
        ),
        # a key without credit answers 429 too: it is billing (auth on the wire), not quota
        (
            refusal(429, error_type="insufficient_quota", error_code="insufficient_quota"),
            "exceeded retry limit, last status: 429 Too Many Requests",
            "auth",
        ),
        (
            refusal(429, error_type="usage_not_included"),
            "To use Codex with your ChatGPT plan, upgrade to Plus",
            "auth",
        ),
        (
            refusal(401, error_code="token_invalidated"),
            "unexpected status 401 Unauthorized: …",
            "auth",
        ),
        (refusal(401, error_code="token_expired"), "unexpected status 401 Unauthorized: …", "auth"),
        (refusal(403, error_code="account_mismatch"), "unexpected status 403 Forbidden: …", "auth"),
        (
            refusal(404, error_code="model_not_found"),
            "The model `x` does not exist",
            "model_unsupported",
        ),
        (
            refusal(
                400,
                message="The 'gpt-9' model is not supported when using Codex with a ChatGPT plan",
            ),
            '{"detail": …}',
            "model_unsupported",
        ),
        (refusal(400, message="Invalid request body"), "Invalid request body", "upstream_error"),
        (
            refusal(500, error_type="server_error"),
            "We’re currently experiencing high demand",
            "upstream_error",
        ),
        (
            refusal(503, error_code="server_is_overloaded"),
            "Selected model is at capacity.",
            "upstream_error",
        ),
        # no kept answer (a refusal inside a 200 stream): the CLI's words decide
        (None, LIMIT_SENTENCE, "rate_limit"),
        (None, "Quota exceeded. Check your plan and billing details.", "auth"),
        (None, "unexpected status 401 Unauthorized: Invalid bearer token., url: http://…", "auth"),
        (None, "unexpected status 404 Not Found: …", "model_unsupported"),
        (None, "stream disconnected before completion: boom", "upstream_error"),
    ],
)
def test_a_codex_refusal_is_classified_from_the_kept_answer_first(
    kept: UpstreamRefusal | None, text: str, code: str
) -> None:
    assert classify_codex_refusal(refusal=kept, text=text, now=NOW).error_code == code


@pytest.mark.parametrize(
    ("kept", "reset"),
    [
        (
            refusal(429, error_type="usage_limit_reached", resets_in_seconds=3600),
            NOW + timedelta(hours=1),
        ),
        # the absolute reset beats the relative one
        (
            refusal(
                429,
                error_type="usage_limit_reached",
                resets_in_seconds=5,
                resets_at=datetime.fromtimestamp(FIVE_H, UTC),
            ),
            datetime.fromtimestamp(FIVE_H, UTC),
        ),
        # a reset equal to the instant it was received is kept, not dropped
        (refusal(429, error_type="usage_limit_reached", resets_in_seconds=0), NOW),
        (refusal(429, error_type="usage_limit_reached"), None),
        # a throttle carries no reset: it is no exhausted window
        (refusal(429, error_code="rate_limit_exceeded", resets_in_seconds=30), None),
    ],
)
def test_a_usage_limit_resets_when_the_upstream_said(
    kept: UpstreamRefusal, reset: datetime | None
) -> None:
    assert classify_codex_refusal(refusal=kept, text=LIMIT_SENTENCE, now=NOW).resets_at == reset


def test_the_sentence_alone_gives_no_reset() -> None:
    verdict = classify_codex_refusal(refusal=None, text=LIMIT_SENTENCE, now=NOW)
    assert (verdict.error_code, verdict.resets_at, verdict.limiting_window) == (
        "rate_limit",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("headers", "reset", "window"),
    [
        (windows(300, 100, 40), FIVE_H, "five_hour"),
        (windows(300, 40, 100), SEVEN_D, "seven_day"),
        # the week as primary is still the week: windows are named by their length
        (windows(10080, 100, 10), SEVEN_D, "seven_day"),
        (windows(10080, 10, 100), FIVE_H, "five_hour"),
        # both exhausted: the one whose reset the refusal named
        (windows(300, 100, 100), FIVE_H, "five_hour"),
        (windows(300, 100, 100), SEVEN_D, "seven_day"),
        # both exhausted, no reset named: the one that resets last binds
        (windows(300, 100, 100), None, "seven_day"),
        (
            {"x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "60"},
            None,
            "window_3600s",
        ),
        ({}, FIVE_H, None),
        (windows(300, 99, 10), FIVE_H, None),
    ],
)
def test_the_limiting_window_is_named_by_its_length(
    headers: dict[str, str], reset: int | None, window: str | None
) -> None:
    resets_at = datetime.fromtimestamp(reset, UTC) if reset is not None else None
    assert codex_limiting_window(headers, resets_at) == window


def test_the_detail_carries_the_providers_own_words() -> None:
    kept = refusal(
        429, error_type="insufficient_quota", message="check your plan and billing details"
    )
    verdict = classify_codex_refusal(refusal=kept, text="exceeded retry limit", now=NOW)
    assert (
        verdict.upstream_said
        == "upstream 429 insufficient_quota: check your plan and billing details"
    )
