"""The JSON contract with the control plane: schema snapshot, examples, override parsing.

If the schema snapshot fails, the contract changed: update the Django-side client and
its pinned copy in the same change, then regenerate the snapshot with
`python -c "import json; from agent_server.contract import contract_schema;
print(json.dumps(contract_schema(), indent=2, sort_keys=True))"`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_server import contract
from agent_server.contract import (
    EXAMPLE_ERRORS,
    EXAMPLES,
    AuthOverride,
    ErrorBody,
    TaskRequest,
    contract_schema,
)
from trinity_contract.errors import ERROR_STATUS

SNAPSHOT = Path(__file__).parent / "snapshots" / "contract_schema.json"


def test_the_contract_schema_matches_the_pinned_snapshot() -> None:
    pinned = json.loads(SNAPSHOT.read_text())
    assert json.loads(json.dumps(contract_schema(), sort_keys=True)) == pinned


@pytest.mark.parametrize(("model", "example"), EXAMPLES, ids=lambda v: getattr(v, "__name__", ""))
def test_every_canonical_example_validates_and_round_trips(
    model: type[BaseModel], example: dict[str, Any]
) -> None:
    parsed = model.model_validate(example)
    dumped = parsed.model_dump(mode="json")
    # SecretStr dumps masked; everything else round-trips exactly
    for key, value in example.items():
        if key in {"token", "auth_override"}:
            continue
        assert dumped[key] == value


def test_every_error_code_has_one_status_and_one_example() -> None:
    codes = set(ErrorBody.model_fields["error_code"].annotation.__args__)  # type: ignore[union-attr]
    assert codes == set(ERROR_STATUS) == set(EXAMPLE_ERRORS)
    assert ERROR_STATUS == {
        "rate_limit": 429,
        "auth": 503,
        "model_unsupported": 400,
        "container_fault": 503,
        "timeout": 504,
        "runtime_killed": 500,
        "upstream_error": 502,
        "billing": 402,
        "invalid_request": 400,
        "unauthorized": 401,
        "cancelled": 409,
    }


def test_resets_at_serialises_as_iso_8601_utc() -> None:
    body = ErrorBody.model_validate(EXAMPLE_ERRORS["rate_limit"])
    assert body.model_dump(mode="json")["resets_at"] == "2026-05-01T04:10:00Z"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"oauth_token": "sk-ant-oat01-a"}, ("oauth_token", "sk-ant-oat01-a")),
        ({"api_key": "sk-ant-api03-b"}, ("api_key", "sk-ant-api03-b")),
        ({"oauth_token": "sk-ant-oat01-a", "api_key": "sk-ant-api03-b"}, None),
        ({}, None),
        ({"oauth_token": "", "api_key": ""}, None),
        ({"oauth_token": "", "api_key": "sk-ant-api03-b"}, ("api_key", "sk-ant-api03-b")),
        ({"oauth_token": None}, None),
    ],
)
def test_an_override_applies_only_with_exactly_one_credential(
    override: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    applied = AuthOverride.model_validate(override).applied()
    assert ((applied.kind, applied.secret) if applied else None) == expected


def test_an_override_never_shows_its_secret_in_a_repr() -> None:
    request = TaskRequest.model_validate(contract.EXAMPLE_TASK_REQUEST_OAUTH_OVERRIDE)
    assert request.auth_override is not None
    applied = request.auth_override.applied()
    for text in (repr(request), str(request), repr(applied), request.model_dump_json()):
        assert "EXAMPLE-NOT-A-TOKEN" not in text


@pytest.mark.parametrize(
    "body",
    [
        {"message": "hi", "timeout_seconds": 1},
        {"execution_id": "e", "timeout_seconds": 1},
        {"execution_id": "e", "message": "hi"},
        {"execution_id": "e", "message": "hi", "timeout_seconds": 0},
        {"execution_id": "", "message": "hi", "timeout_seconds": 1},
    ],
)
def test_a_task_request_needs_an_id_a_message_and_a_positive_timeout(
    body: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        TaskRequest.model_validate(body)
