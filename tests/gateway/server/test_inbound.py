"""What the gateway reads of a request: the model, the stream flag, the session."""

from __future__ import annotations

import json

import pytest

from gateway.catalog import allowed_models, family_of
from gateway.server.inbound import BadRequest, parse


def body(**fields: object) -> bytes:
    return json.dumps({"model": "claude-sonnet-5-5", **fields}).encode()


@pytest.mark.parametrize(
    ("user_id", "session"),
    [
        ("user_ab12_account_9f00_session_3c0e9a4e-1d2b-4c5f-9a8b-0123456789ab",
         "3c0e9a4e-1d2b-4c5f-9a8b-0123456789ab"),
        ("some-sdk-user", "some-sdk-user"),  # not Claude Code's form: the whole id
        (None, ""),
    ],
)  # fmt: skip
def test_claude_codes_session_is_read_from_metadata_user_id(
    user_id: str | None, session: str
) -> None:
    metadata = {"user_id": user_id} if user_id is not None else {}
    assert parse("anthropic", body(metadata=metadata), []).session_id == session


def test_the_codex_clis_session_is_its_prompt_cache_key_else_its_session_header() -> None:
    keyed = json.dumps({"model": "gpt-5.5-codex", "prompt_cache_key": "conv-1"}).encode()
    plain = json.dumps({"model": "gpt-5.5-codex"}).encode()
    assert parse("openai-codex", keyed, []).session_id == "conv-1"
    assert parse("openai-codex", plain, [(b"session_id", b"conv-2")]).session_id == "conv-2"
    assert parse("openai-codex", plain, []).session_id == ""


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b'"x"', json.dumps({"messages": []}).encode(), body(model="  ")]
)
def test_a_body_without_a_json_object_and_a_model_is_a_400(raw: bytes) -> None:
    with pytest.raises(BadRequest) as refused:
        parse("anthropic", raw, [])
    assert refused.value.status == 400


def test_stream_is_true_only_when_the_body_says_true() -> None:
    assert parse("anthropic", body(stream=True), []).stream is True
    assert parse("anthropic", body(stream="yes"), []).stream is False


@pytest.mark.parametrize(
    ("provider", "model", "family"),
    [
        ("anthropic", "claude-sonnet-5-5", "sonnet"),
        ("anthropic", "claude-opus-4-5-20251101", "opus"),
        ("anthropic", "claude-haiku-4-5", "haiku"),
        ("anthropic", "sonnet", None),  # not a Claude model name
        ("anthropic", "gpt-5", None),
        ("openai-codex", "gpt-5.5-codex", "codex"),
        ("openai-codex", "gpt-5-mini", "gpt-5"),
        ("openai-codex", "claude-sonnet-5-5", None),
        ("openai-codex", "", None),
    ],
)
def test_a_model_is_known_by_its_providers_families(
    provider: str, model: str, family: str | None
) -> None:
    assert family_of(provider, model) == family


def test_a_keys_models_are_narrowed_by_its_providers_and_families() -> None:
    assert allowed_models(["anthropic"], ["haiku"]) == [("anthropic", "claude-haiku-4-5")]
    assert {p for p, _ in allowed_models([], [])} == {"anthropic", "openai-codex"}
