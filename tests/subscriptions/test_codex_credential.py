"""What an operator may paste as a Codex plan's credential, and how it is stored."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from subscriptions.codex_credential import (
    CodexCredential,
    CodexCredentialError,
    codex_credential_load,
    codex_credential_parse,
)
from subscriptions.tokens import plan_token_fingerprint, validate_plan_token
from trinity.errors import InvalidInput
from trinity_contract.codex import AUTH_CLAIMS


def _b64(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def jwt(claims: dict[str, object]) -> str:
    return _b64({"alg": "none", "typ": "JWT"}) + "." + _b64(claims) + ".c2lnbmF0dXJl"


EXP = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())
ACCESS = jwt({"exp": EXP, AUTH_CLAIMS: {"chatgpt_account_id": "acct-claimed"}})
ID_TOKEN = jwt({"email": "op@example.test", AUTH_CLAIMS: {"chatgpt_account_id": "acct-id"}})
AUTH_JSON = json.dumps(
    {
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": ID_TOKEN,
            "access_token": ACCESS,
            "refresh_token": "rt-0123456789abcdef",
            "account_id": "acct-1",
        },
        "last_refresh": "2029-12-31T00:00:00Z",
    },
    indent=2,
)


def test_the_auth_json_codex_login_wrote_is_a_credential() -> None:
    credential = codex_credential_parse(AUTH_JSON)
    assert credential.account_id == "acct-1"
    assert credential.refresh_token == "rt-0123456789abcdef"
    assert credential.refreshable
    assert credential.expires_at() == datetime(2030, 1, 1, tzinfo=UTC)
    # Its tokens object alone is the same credential.
    tokens = json.dumps(json.loads(AUTH_JSON)["tokens"])
    assert codex_credential_parse(tokens) == credential


def test_the_account_comes_from_the_tokens_when_auth_json_names_none() -> None:
    tokens = json.loads(AUTH_JSON)["tokens"]
    del tokens["account_id"]
    assert codex_credential_parse(json.dumps(tokens)).account_id == "acct-id"
    del tokens["id_token"]
    assert codex_credential_parse(json.dumps(tokens)).account_id == "acct-claimed"


def test_a_bare_access_token_is_accepted_and_cannot_be_refreshed() -> None:
    credential = codex_credential_parse(ACCESS)
    assert not credential.refreshable
    assert credential.account_id == "acct-claimed"
    assert codex_credential_load(credential.dumps()) == credential
    # A bare token stored before the JSON form loads as itself.
    assert codex_credential_load(ACCESS) == credential


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("not a token", "auth.json"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "auth.json"),
        (json.dumps({"tokens": "x"}), "tokens must be an object"),
        (json.dumps({"tokens": {"refresh_token": "r"}}), "tokens.access_token is missing"),
        (json.dumps({"tokens": {"access_token": "abc", "refresh_token": "r"}}), "not a JWT"),
        (json.dumps({"tokens": {"access_token": ACCESS}}), "tokens.refresh_token is missing"),
        (json.dumps({"tokens": {"access_token": ACCESS, "refresh_token": 7}}), "must be a string"),
        (
            json.dumps({"tokens": {"access_token": jwt({"exp": EXP}), "refresh_token": "rt"}}),
            "account_id is missing",
        ),
    ],
)
def test_a_bad_credential_is_refused_naming_what_is_wrong_never_a_value(
    text: str, names: str
) -> None:
    with pytest.raises(CodexCredentialError) as refused:
        codex_credential_parse(text)
    assert names in str(refused.value)
    assert "rt-" not in str(refused.value) and ACCESS not in str(refused.value)


def test_rotation_keeps_the_account_and_whatever_the_answer_left_out() -> None:
    credential = codex_credential_parse(AUTH_JSON)
    rotated = credential.rotated(access_token="eyJa.eyJb.c", refresh_token="", id_token="")
    assert rotated.account_id == "acct-1"
    assert rotated.refresh_token == credential.refresh_token
    assert rotated.id_token == credential.id_token
    assert rotated.access_token == "eyJa.eyJb.c"


def test_the_repr_shows_the_account_and_no_token() -> None:
    text = repr(codex_credential_parse(AUTH_JSON))
    assert "acct-1" in text
    assert ACCESS not in text and "rt-0123456789abcdef" not in text and ID_TOKEN not in text


def test_registration_stores_the_parsed_credential_and_fingerprints_its_access_token() -> None:
    stored = validate_plan_token(provider="openai-codex", token=AUTH_JSON)
    assert codex_credential_load(stored) == codex_credential_parse(AUTH_JSON)
    assert plan_token_fingerprint(provider="openai-codex", token=stored) == ACCESS[-4:]
    with pytest.raises(InvalidInput) as refused:
        validate_plan_token(provider="openai-codex", token="sk-proj-" + "a" * 40)
    assert "OpenAI platform key" in str(refused.value)


def test_the_stored_form_is_unreadable_only_when_it_is_neither_shape() -> None:
    with pytest.raises(CodexCredentialError):
        codex_credential_load('{"access_token": "x"}')
    assert isinstance(
        codex_credential_load(CodexCredential(ACCESS, "r", "a").dumps()), CodexCredential
    )
