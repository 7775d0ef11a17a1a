"""The one classifier of a refused attempt, as a table: typed code first, text second."""

from __future__ import annotations

import pytest

from routing.attempt_refusal import classify_attempt_refusal


@pytest.mark.parametrize(
    ("error_code", "detail", "code", "kind", "reason"),
    [
        # typed codes from the agent server
        (
            "rate_limit",
            "You've hit your limit · resets 4:10am (UTC)",
            "rate_limit",
            "rate_limit",
            "rate limit",
        ),
        (
            "auth",
            "Failed to authenticate. API Error: 401 OAuth token has expired",
            "auth",
            "auth",
            "auth",
        ),
        ("auth", "Credit balance is too low", "auth", "auth", "billing"),
        (
            "model_unsupported",
            "There's an issue with the selected model (x)",
            "model_unsupported",
            None,
            "model rejected",
        ),
        (
            "container_fault",
            "cannot start the Claude Code CLI",
            "container_fault",
            None,
            "container fault",
        ),
        (
            "runtime_killed",
            "the Claude Code CLI was killed by SIGKILL",
            "runtime_killed",
            None,
            "killed",
        ),
        ("timeout", "the turn exceeded timeout_seconds=600", "timeout", None, "timeout"),
        ("upstream_error", "API Error: 529 Overloaded", "upstream_error", None, "upstream error"),
        # the typed code wins over the text
        ("model_unsupported", "You've hit your limit", "model_unsupported", None, "model rejected"),
        ("container_fault", "Failed to authenticate", "container_fault", None, "container fault"),
        ("upstream_error", "rate limit", "upstream_error", None, "upstream error"),
        # an agent server that predates typed codes: the text decides
        (
            "",
            "You've hit your limit · resets 4:10am (UTC)",
            "rate_limit",
            "rate_limit",
            "rate limit",
        ),
        ("", "API Error: 429 rate_limit_error", "rate_limit", "rate_limit", "rate limit"),
        ("", "Failed to authenticate. API Error: 403", "auth", "auth", "auth"),
        ("", "Invalid API key · Please run /login", "auth", "auth", "auth"),
        ("", "Your credit balance is too low to access the API", "auth", "auth", "billing"),
        (
            "",
            "There's an issue with the selected model (x)",
            "model_unsupported",
            None,
            "model rejected",
        ),
        ("", "something nobody has seen before", "upstream_error", None, "upstream error"),
        ("weird_new_code", "Failed to authenticate", "auth", "auth", "auth"),
        # a kill is never auth, whatever else the text says
        (
            "auth",
            "Failed to authenticate: process killed by SIGKILL",
            "runtime_killed",
            None,
            "killed",
        ),
        ("auth", "unauthorized; exit code 137", "runtime_killed", None, "killed"),
        ("auth", "401 after SIGTERM", "runtime_killed", None, "killed"),
        ("", "Failed to authenticate (exited with status 143)", "runtime_killed", None, "killed"),
        ("", "container OOM: out of memory", "runtime_killed", None, "killed"),
        ("", "the CLI died: SIGKILL", "runtime_killed", None, "killed"),
        # ...but a typed rate limit is the CLI's own verdict, not a kill
        (
            "rate_limit",
            "hit your limit (SIGTERM received later)",
            "rate_limit",
            "rate_limit",
            "rate limit",
        ),
        # a number that merely contains 137 is not an exit code
        ("auth", "OAuth token 1370 has expired", "auth", "auth", "auth"),
    ],
)
def test_it_classifies_each_refusal(
    error_code: str, detail: str, code: str, kind: str | None, reason: str
) -> None:
    refusal = classify_attempt_refusal(error_code=error_code, detail=detail)
    assert (refusal.error_code, refusal.failure_kind, refusal.reason) == (code, kind, reason)
    assert refusal.walks is (kind is not None)


@pytest.mark.parametrize(
    "code", ["model_unsupported", "container_fault", "runtime_killed", "timeout"]
)
def test_only_quota_and_credential_refusals_walk(code: str) -> None:
    assert not classify_attempt_refusal(error_code=code, detail="Failed to authenticate").walks
