"""The OpenAPI schema (`/api/schema/`, `/api/docs/`): generated without a single
warning, every request and response body its own, correctly named component.

THE NO-WARNING TEST is ``test_schema_generation_emits_no_warning_or_error``: it
generates the whole schema exactly as ``manage.py spectacular --fail-on-warn`` does
and fails on any warning or error drf-spectacular reports, listing them.
"""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    generated: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return generated


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.removeprefix("#/components/schemas/")
    resolved: dict[str, Any] = schema["components"]["schemas"][name]
    return resolved


def _request_component(schema: dict[str, Any], method: str, path: str) -> tuple[str, set[str]]:
    body = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    name = body["$ref"].removeprefix("#/components/schemas/")
    return name, set(_resolve(schema, body)["properties"])


def _response_fields(schema: dict[str, Any], method: str, path: str, code: str) -> set[str]:
    response = schema["paths"][path][method]["responses"][code]
    body = response["content"]["application/json"]["schema"]
    if body.get("type") == "array":
        body = body["items"]
    return set(_resolve(schema, body)["properties"])


def test_schema_generation_emits_no_warning_or_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Fails on ANY drf-spectacular warning or error over the whole schema.

    drf-spectacular reports through ``GENERATOR_STATS`` (printed to stderr and
    counted); ``get_schema`` resets it first, and ``--fail-on-warn`` fails on exactly
    this truthiness.
    """
    generated = SchemaGenerator().get_schema(request=None, public=True)
    reported = capsys.readouterr().err
    assert not GENERATOR_STATS, f"schema generation reported:\n{reported}"
    validate_schema(generated)  # a valid OpenAPI 3 document, as --validate checks


@pytest.mark.parametrize(
    ("method", "path", "component", "fields"),
    [
        (
            "post",
            "/api/agents",
            "AgentListInput",
            {
                "name",
                "runtime",
                "model",
                "use_platform_api_key",
                "routing_policy",
                "wait_policy",
                "max_wait_seconds",
                "key_budget_daily_usd",
                "key_budget_monthly_usd",
                "allowed_tools",
                "placement",
                "auto_assign",
            },
        ),
        (
            "patch",
            "/api/agents/{name}",
            "PatchedAgentUpdateInput",
            {
                "runtime",
                "model",
                "use_platform_api_key",
                "routing_policy",
                "wait_policy",
                "max_wait_seconds",
                "key_budget_daily_usd",
                "key_budget_monthly_usd",
                "allowed_tools",
                "placement",
            },
        ),
        (
            "post",
            "/api/agents/{name}/task",
            "AgentTaskInput",
            {"message", "model", "timeout_seconds"},
        ),
        (
            "post",
            "/api/subscriptions",
            "SubscriptionListInput",
            {"name", "token", "provider", "plan_type"},
        ),
        ("put", "/api/subscriptions/agents/{name}", "AgentAssignmentInput", {"subscription_id"}),
        ("put", "/api/subscriptions/settings/auto-switch", "SwitchSettingInput", {"enabled"}),
        ("put", "/api/subscriptions/settings/api-key-fallback", "SwitchSettingInput", {"enabled"}),
        (
            "put",
            "/api/subscriptions/settings/headroom-auto-refresh",
            "SwitchSettingInput",
            {"enabled"},
        ),
        (
            "put",
            "/api/subscriptions/settings/headroom-alert-threshold",
            "HeadroomAlertThresholdInput",
            {"threshold"},
        ),
        (
            "put",
            "/api/subscriptions/settings/routing",
            "RoutingSettingsInput",
            {
                "default_routing_policy",
                "routing_strategy",
                "key_budget_daily_usd",
                "key_budget_monthly_usd",
            },
        ),
        ("put", "/api/settings/platform-api-key", "PlatformApiKeyInput", {"key"}),
        ("post", "/api/auth/tokens", "ApiTokenInput", {"username", "rotate"}),
    ],
)
def test_each_request_body_is_its_own_view_named_component(
    schema: dict[str, Any], method: str, path: str, component: str, fields: set[str]
) -> None:
    name, properties = _request_component(schema, method, path)
    assert name == component
    assert fields <= properties


def test_no_component_is_a_bare_nested_serializer_name(schema: dict[str, Any]) -> None:
    names = set(schema["components"]["schemas"])
    assert not names & {"Input", "Output", "PatchedInput"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/agents/{name}/start"),
        ("post", "/api/agents/{name}/stop"),
        ("post", "/api/subscriptions/{id}/usage/refresh"),
        ("delete", "/api/settings/platform-api-key"),
    ],
)
def test_bodyless_actions_declare_no_request_body(
    schema: dict[str, Any], method: str, path: str
) -> None:
    assert "requestBody" not in schema["paths"][path][method]


@pytest.mark.parametrize(
    ("method", "path", "code", "fields"),
    [
        ("get", "/api/subscriptions/settings/auto-switch", "200", {"enabled"}),
        ("put", "/api/subscriptions/settings/auto-switch", "200", {"enabled"}),
        (
            "get",
            "/api/subscriptions/settings/api-key-fallback",
            "200",
            {"enabled", "key_configured"},
        ),
        (
            "put",
            "/api/subscriptions/settings/api-key-fallback",
            "200",
            {"enabled", "key_configured"},
        ),
        ("get", "/api/subscriptions/settings/headroom-alert-threshold", "200", {"threshold"}),
        ("get", "/api/settings/platform-api-key", "200", {"configured", "fingerprint"}),
        ("put", "/api/settings/platform-api-key", "200", {"configured", "fingerprint"}),
        ("delete", "/api/settings/platform-api-key", "200", {"configured", "fingerprint"}),
        ("get", "/api/agents/{name}/health", "200", {"state", "alive"}),
        ("get", "/api/agents/{name}", "200", {"name", "allowed_tools", "placement"}),
        ("post", "/api/agents/{name}/start", "503", {"name", "process_state", "process_detail"}),
        (
            "get",
            "/api/subscriptions/{id}/headroom/history",
            "200",
            {"subscription_id", "window", "samples"},
        ),
        ("get", "/api/subscriptions/{id}", "200", {"id", "name", "token_fingerprint"}),
        ("post", "/api/auth/tokens", "200", {"username", "token"}),
        # Error shapes: what the one exception handler answers.
        ("get", "/api/agents/{name}", "404", {"detail", "code"}),
        ("get", "/api/agents", "401", {"detail"}),
        ("put", "/api/settings/platform-api-key", "403", {"detail"}),
    ],
)
def test_each_response_body_is_described(
    schema: dict[str, Any], method: str, path: str, code: str, fields: set[str]
) -> None:
    assert fields <= _response_fields(schema, method, path, code)


def test_every_operation_describes_its_success_body(schema: dict[str, Any]) -> None:
    """No 2xx answer (other than a 204) is left as an undescribed free-form body."""
    missing = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code.startswith("2") and code != "204" and "content" not in response:
                    missing.append(f"{method.upper()} {path} {code}")
    assert missing == []


def test_the_schema_endpoint_serves_it_to_a_signed_in_user(owner_client: APIClient) -> None:
    response = owner_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "AgentTaskInput" in response.json()["components"]["schemas"]


def test_the_placement_is_described_as_label_names_to_constrained_values(
    schema: dict[str, Any],
) -> None:
    body = schema["paths"]["/api/agents"]["post"]["requestBody"]["content"]["application/json"]
    placement = _resolve(schema, body["schema"])["properties"]["placement"]
    assert placement["type"] == "object"
    assert placement["maxProperties"] == 8
    values = placement["additionalProperties"]
    assert (values["type"], values["maxLength"]) == ("string", 63)
    assert values["pattern"].startswith("^") and values["pattern"].endswith("$")
    assert "node.labels.<name>==<value>" in placement["description"]
