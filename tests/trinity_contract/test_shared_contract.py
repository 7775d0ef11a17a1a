"""Both sides hold the very same contract objects, and so classify text alike.

The agent server and the platform once kept a copy each of the error codes and the
refusal-text patterns, and the copies drifted (the platform missed "your 5-hour
limit"). These tests fail if either side grows its own copy again.
"""

from __future__ import annotations

import ast
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import agent_server.__main__ as server_main
import agents.client
import routing.attempt_refusal
import trinity.crypto
from agent_server import app, classifier, contract, errors, forwarder, state
from trinity_contract import errors as shared_errors
from trinity_contract import log_json, proof, redaction, refusal_text

NOW = datetime(2026, 11, 30, 3, 25, tzinfo=UTC)
PACKAGE = Path(refusal_text.__file__).parent
AGENT_SERVER = Path(app.__file__).parent


def test_both_sides_use_the_shared_codes_statuses_and_proof() -> None:
    assert contract.ErrorBody.model_fields["error_code"].annotation is shared_errors.ErrorCode
    assert errors.ERROR_STATUS is shared_errors.ERROR_STATUS
    assert app.ERROR_STATUS is shared_errors.ERROR_STATUS
    assert routing.attempt_refusal.ERROR_CODES is shared_errors.ERROR_CODES
    assert shared_errors.ERROR_CODES == set(shared_errors.ERROR_STATUS)
    assert app.health_proof is proof.health_proof
    assert agents.client.proof_matches is proof.proof_matches


def test_both_classifiers_read_the_shared_patterns() -> None:
    assert classifier.error_code_from_text is refusal_text.error_code_from_text
    platform = routing.attempt_refusal
    assert platform.error_code_from_text is refusal_text.error_code_from_text
    assert platform.BILLING_TEXT is refusal_text.BILLING_TEXT
    assert platform.KILL_TEXT is refusal_text.KILL_TEXT
    assert platform.QUOTA_TEXT is refusal_text.QUOTA_TEXT


def test_both_sides_redact_and_write_json_lines_with_the_shared_code() -> None:
    assert server_main.Redactor is state.Redactor is forwarder.Redactor is redaction.Redactor
    assert server_main.JsonFormatter is log_json.JsonFormatter
    assert server_main.install_log_redaction is redaction.install_log_redaction
    assert app.log_context is log_json.log_context
    assert trinity.crypto.redaction is redaction


# The platform process's registry: what an agent server hides is its own Redactor's.
_PLATFORM_ONLY = {"platform_redactor", "register_secret", "redact"}


def test_the_agent_server_never_uses_the_platform_process_registry() -> None:
    used: set[str] = set()
    for path in AGENT_SERVER.rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "trinity_contract.redaction":
                used.update(alias.name for alias in node.names if alias.name in _PLATFORM_ONLY)
            elif isinstance(node, ast.Attribute) and node.attr in _PLATFORM_ONLY:
                if isinstance(node.value, ast.Name) and node.value.id == "redaction":
                    used.add(node.attr)
    assert not used


@pytest.mark.parametrize(
    ("text", "code"),
    [
        # the CLI's sentences, across the versions the notes record
        ("You've hit your limit · resets 4:10am (UTC)", "rate_limit"),
        ("You've hit your session limit · resets 6:25am (UTC)", "rate_limit"),
        ("You've hit your 5-hour limit · resets 12:21pm (UTC)", "rate_limit"),
        ("You've hit your weekly limit · resets Dec 8, 7:21am (UTC)", "rate_limit"),
        ("You've hit your Opus limit · resets Dec 8, 7:21am (UTC)", "rate_limit"),
        ("Server is temporarily limiting requests (not your usage limit)", "rate_limit"),
        ("API Error: 429 rate_limit_error", "rate_limit"),
        ("Failed to authenticate. API Error: 401 OAuth token has expired.", "auth"),
        ("Failed to authenticate. API Error: 403 permission_error", "auth"),
        ("Not logged in · Please run /login", "auth"),
        ("Invalid API key · Please run /login", "auth"),
        ("Credit balance is too low", "auth"),
        ("invalid_request_error: Your credit balance is too low to access", "auth"),
        ("There's an issue with the selected model (claude-nope-1).", "model_unsupported"),
        ("not_found_error: model: claude-nope-1", "model_unsupported"),
        ("API Error: 529 Overloaded", "upstream_error"),
        ("prompt is too long", "upstream_error"),
        # an agent server refusing the platform's own secret says nothing of the
        # turn's credential
        ("unauthorized: missing or wrong bearer secret", "upstream_error"),
        ("HTTP 401", "upstream_error"),
        ("", "upstream_error"),
    ],
)
def test_the_two_classifiers_agree_on_every_text(text: str, code: str) -> None:
    runtime = classifier.classify_runtime_refusal(api_error_status=None, text=text, now=NOW)
    attempt = routing.attempt_refusal.classify_attempt_refusal(error_code="", detail=text)
    assert runtime.error_code == attempt.error_code == code


def test_the_contract_package_imports_only_the_standard_library_and_itself() -> None:
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"trinity_contract"}
