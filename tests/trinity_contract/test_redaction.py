"""Redaction of credential values in text and in log records: the agent server's
policy (``Redactor()``) and the platform's (``platform_redactor``), one mechanism."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from trinity_contract.redaction import (
    CREDENTIAL_SHAPES,
    PLATFORM_MIN_SECRET_LENGTH,
    RedactingFilter,
    Redactor,
    install_log_redaction,
    is_credential_name,
    mask,
    redact,
    register_secret,
)

LONG = "sk-ant-oat01-canary-0123456789-abcd"


def test_a_registered_value_is_replaced_with_at_most_its_last_four_chars() -> None:
    redactor = Redactor()
    redactor.add(LONG)
    out = redactor.redact(f"token={LONG}; again {LONG}")
    assert LONG not in out
    assert out == "token=[redacted:…abcd]; again [redacted:…abcd]"


def test_a_short_value_is_replaced_whole() -> None:
    redactor = Redactor()
    redactor.add("hunter2x")
    assert redactor.redact("pw hunter2x") == "pw [redacted]"


def test_too_short_values_are_not_registered() -> None:
    redactor = Redactor()
    redactor.add("1", "", None, "abc")
    assert redactor.redact("1 abc") == "1 abc"


def test_a_secret_containing_another_is_hidden_whole() -> None:
    redactor = Redactor()
    redactor.add("plain-secret-value-1", "prefix-plain-secret-value-1-suffix")
    out = redactor.redact("x prefix-plain-secret-value-1-suffix y")
    assert "plain-secret" not in out
    assert "suffix" not in out


def test_anything_shaped_like_an_anthropic_credential_is_redacted_unregistered() -> None:
    out = Redactor().redact("the CLI said sk-ant-api03-neverseen_XYZ-9876 was bad")
    assert "neverseen" not in out
    assert "[redacted:…9876]" in out


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("ANTHROPIC_API_KEY", True),
        ("CLAUDE_CODE_OAUTH_TOKEN", True),
        ("ANTHROPIC_AUTH_TOKEN", True),
        ("TRINITY_AGENT_SECRET", True),
        ("DB_PASSWORD", True),
        ("PATH", False),
        ("ANTHROPIC_BASE_URL", False),
    ],
)
def test_it_knows_which_env_names_carry_credentials(name: str, credential: bool) -> None:
    assert is_credential_name(name) is credential


def test_credentials_from_an_environment_are_registered_by_name() -> None:
    redactor = Redactor()
    redactor.add_credentials_from({"ANTHROPIC_API_KEY": "key-value-12345", "LANG": "C.UTF-8"})
    assert redactor.redact("key-value-12345 C.UTF-8") == "[redacted] C.UTF-8"


@pytest.fixture
def isolated_logger() -> Iterator[logging.Logger]:
    """A logger of this test's own, detached again afterwards: a handler left on it
    would outlive the test in this process's logging tree."""
    logger = logging.getLogger("tests.trinity_contract.redaction")
    yield logger
    logger.handlers.clear()
    logger.propagate = True


def test_the_log_filter_redacts_messages_args_and_tracebacks(
    isolated_logger: logging.Logger,
) -> None:
    redactor = Redactor()
    redactor.add(LONG)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = isolated_logger
    logger.handlers[:] = [handler]
    logger.propagate = False
    install_log_redaction(redactor, [logger])
    install_log_redaction(redactor, [logger])  # idempotent
    assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1

    logger.warning("inline %s", LONG)
    logger.warning(f"formatted {LONG}")
    try:
        raise RuntimeError(f"boom {LONG}")
    except RuntimeError:
        logger.exception("failed")

    text = stream.getvalue()
    assert LONG not in text
    assert text.count(mask(LONG)) == 3
    assert "RuntimeError" in text


def platform_policy() -> Redactor:
    """A fresh registry with ``platform_redactor``'s policy (the process's own keeps
    every value the session registered)."""
    return Redactor(shapes=CREDENTIAL_SHAPES, min_length=PLATFORM_MIN_SECRET_LENGTH, hint=False)


def test_the_platform_hides_a_registered_value_whole() -> None:
    redactor = platform_policy()
    redactor.add(LONG)
    assert redactor.redact(f"token={LONG}") == "token=[redacted]"


def test_the_platform_registers_no_value_shorter_than_eight() -> None:
    redactor = platform_policy()
    redactor.add("hunter2", "hunter22")
    assert redactor.redact("hunter2 hunter22") == "hunter2 [redacted]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-ant-api03-neverseen_XYZ-9876 bad", "key [redacted] bad"),
        ("openai sk-proj-abcdefghijklmnopqrstuv", "openai [redacted]"),
        ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "jwt [redacted]"),
        ("Authorization: Bearer abcdefgh12345", "Authorization: Bearer [redacted]"),
        ("bearer short", "bearer short"),
        ("x-api-key: trinity-gw-AbC_12-xyz0123456789abcdefgh", "x-api-key: [redacted]"),
        ("key trinity-gw-AbC_12… in a list", "key trinity-gw-AbC_12… in a list"),
        ("", ""),
    ],
)
def test_the_platform_masks_every_credential_shape_unregistered(text: str, expected: str) -> None:
    assert platform_policy().redact(text) == expected


def test_the_agent_servers_net_is_the_anthropic_shape_only() -> None:
    """It redacts a turn's answer too, where a JWT or a bearer value is the model's text."""
    text = "Bearer abcdefgh12345 eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl"
    assert Redactor().redact(text) == text


def test_register_secret_and_redact_use_the_platform_process_registry() -> None:
    value = "platform-process-secret-0123456789"
    register_secret(value)
    assert redact(f"x {value} y") == "x [redacted] y"
