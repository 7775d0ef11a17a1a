"""Classifier table: each row is a refusal the real CLI or the Messages API produced."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_server.classifier import (
    RuntimeRefusal,
    classify_runtime_refusal,
    parse_reset_phrase,
    parse_unified_reset,
)

NOW = datetime(2026, 11, 30, 3, 25, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "text", "code"),
    [
        # the CLI notes' table and what CLI 2.1.197 printed
        (429, "You've hit your limit · resets 4:10am (UTC)", "rate_limit"),
        (429, "You've hit your session limit · resets 6:25am (UTC)", "rate_limit"),
        (429, "You've hit your weekly limit · resets Dec 3, 3:25am (UTC)", "rate_limit"),
        (401, "Failed to authenticate. API Error: 401 OAuth token has expired.", "auth"),
        (401, "Failed to authenticate. API Error: 401 OAuth token has been revoked.", "auth"),
        (401, "Not logged in · Please run /login", "auth"),
        (403, "Failed to authenticate. API Error: 403 permission_error", "auth"),
        (400, "Credit balance is too low", "auth"),
        (
            404,
            "There's an issue with the selected model (claude-nope-1). It may not exist or "
            "you may not have access to it. Run --model to pick a different model.",
            "model_unsupported",
        ),
        # observed with CLI 2.1.332: the 5 h window is now "your 5-hour limit"
        (429, "You've hit your 5-hour limit · resets 12:21pm (UTC)", "rate_limit"),
        (None, "You've hit your 5-hour limit · resets 12:21pm (UTC)", "rate_limit"),
        (None, "You've hit your weekly limit · resets Dec 8, 7:21am (UTC)", "rate_limit"),
        (None, "You've hit your Opus limit · resets Dec 8, 7:21am (UTC)", "rate_limit"),
        # status first: the sentence is UI copy, the status is not
        (429, "something the CLI never said before", "rate_limit"),
        (401, "You've hit your limit", "auth"),
        (404, "anything", "model_unsupported"),
        # a 400 is decided by its text
        (400, "prompt is too long", "upstream_error"),
        (400, "There's an issue with the selected model (x)", "model_unsupported"),
        # no status: the text decides
        (None, "You've hit your limit · resets 4:10am (UTC)", "rate_limit"),
        (None, "Credit balance is too low", "auth"),
        (None, "Invalid API key · Please run /login", "auth"),
        (None, "There's an issue with the selected model (x).", "model_unsupported"),
        (None, "API Error: 529 Overloaded", "upstream_error"),
        (500, "API Error: 500 Internal server error", "upstream_error"),
        (None, "", "upstream_error"),
        # the direct-API runtime passes "<type>: <message>"
        (401, "authentication_error: invalid x-api-key", "auth"),
        (400, "invalid_request_error: Your credit balance is too low to access", "auth"),
        (404, "not_found_error: model: claude-nope-1", "model_unsupported"),
    ],
)
def test_it_classifies_each_observed_refusal(status: int | None, text: str, code: str) -> None:
    assert classify_runtime_refusal(api_error_status=status, text=text, now=NOW).error_code == code


def test_it_reports_resets_at_only_for_a_rate_limit() -> None:
    limited = classify_runtime_refusal(
        api_error_status=429, text="You've hit your limit · resets 4:10am (UTC)", now=NOW
    )
    assert limited.resets_at == datetime(2026, 11, 30, 4, 10, tzinfo=UTC)
    auth = classify_runtime_refusal(api_error_status=401, text="resets 4:10am (UTC)", now=NOW)
    assert auth.resets_at is None


def test_a_5_hour_limit_without_a_status_still_carries_its_reset() -> None:
    limited = classify_runtime_refusal(
        api_error_status=None, text="You've hit your 5-hour limit · resets 4:10am (UTC)", now=NOW
    )
    assert limited == RuntimeRefusal("rate_limit", datetime(2026, 11, 30, 4, 10, tzinfo=UTC))


def test_a_structured_reset_hint_beats_the_sentence() -> None:
    hint = datetime(2026, 11, 30, 8, 0, 1, tzinfo=UTC)
    refusal = classify_runtime_refusal(
        api_error_status=429,
        text="You've hit your limit · resets 4:10am (UTC)",
        now=NOW,
        reset_hint=hint,
    )
    assert refusal.resets_at == hint


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        # later today
        ("resets 4:10am (UTC)", NOW, datetime(2026, 11, 30, 4, 10, tzinfo=UTC)),
        # already passed today: tomorrow
        ("resets 3:10am (UTC)", NOW, datetime(2026, 12, 1, 3, 10, tzinfo=UTC)),
        # a reset instant equal to now is now, not tomorrow
        ("resets 3:25am (UTC)", NOW, datetime(2026, 11, 30, 3, 25, tzinfo=UTC)),
        # within the minute-precision tolerance: still the current window
        ("resets 3:24am (UTC)", NOW, datetime(2026, 11, 30, 3, 24, tzinfo=UTC)),
        # past the tolerance: tomorrow
        ("resets 3:22am (UTC)", NOW, datetime(2026, 12, 1, 3, 22, tzinfo=UTC)),
        ("resets 12am (UTC)", NOW, datetime(2026, 12, 1, 0, 0, tzinfo=UTC)),
        ("resets 12pm (UTC)", NOW, datetime(2026, 11, 30, 12, 0, tzinfo=UTC)),
        ("resets 11:59pm (UTC)", NOW, datetime(2026, 11, 30, 23, 59, tzinfo=UTC)),
        # the CLI prints the zone it runs in
        (
            "resets 1:26am (America/New_York)",
            NOW,
            datetime(2026, 11, 30, 6, 26, tzinfo=UTC),
        ),
        # with a date (the weekly window)
        ("resets Dec 3, 3:25am (UTC)", NOW, datetime(2026, 12, 3, 3, 25, tzinfo=UTC)),
        (
            "resets Dec 3, 8:56am (Asia/Kolkata)",
            NOW,
            datetime(2026, 12, 3, 3, 26, tzinfo=UTC),
        ),
        # a date across the new year is next year's
        (
            "resets Jan 2, 9:00am (UTC)",
            datetime(2026, 12, 30, tzinfo=UTC),
            datetime(2027, 1, 2, 9, 0, tzinfo=UTC),
        ),
        # unknown or missing zone, or no phrase: unknown, never guessed
        ("resets 4:10am (Mars/Olympus)", NOW, None),
        ("resets 4:10am", NOW, None),
        ("You've hit your limit", NOW, None),
        ("resets Foo 3, 3:25am (UTC)", NOW, None),
        ("resets Feb 30, 3:25am (UTC)", NOW, None),
    ],
)
def test_it_parses_the_cli_reset_phrase(
    text: str, now: datetime, expected: datetime | None
) -> None:
    assert parse_reset_phrase(text, now=now) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1796009131", datetime.fromtimestamp(1796009131, tz=UTC)),
        ("2026-11-30T04:10:00Z", datetime(2026, 11, 30, 4, 10, tzinfo=UTC)),
        ("2026-11-30T04:10:00", None),  # naive: unknown zone
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_it_parses_the_unified_reset_header(value: str | None, expected: datetime | None) -> None:
    assert parse_unified_reset(value) == expected
