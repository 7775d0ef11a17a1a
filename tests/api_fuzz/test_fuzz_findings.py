"""What the schemathesis fuzz found, each pinned on its own (test_schemathesis_fuzz.py
finds them again in its own words when they come back)."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.agents.factories import AgentFactory
from trinity import clock
from trinity.notification_channels import notification_channel_create
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    generated: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return generated


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema says it (a null is also allowed)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    return {"anyOf": [converted, {"type": "null"}]} if node.get("nullable") else converted


def _response_schema(schema: dict[str, Any], method: str, path: str, code: int) -> dict[str, Any]:
    """The schema an answer with this code must match, with components resolvable."""
    response = schema["paths"][path][method]["responses"][str(code)]
    body: dict[str, Any] = response["content"]["application/json"]["schema"]
    converted: dict[str, Any] = _json_schema({**body, "components": schema["components"]})
    return converted


def _conforms(schema: dict[str, Any], method: str, path: str, response: Any) -> None:
    validator = jsonschema_rs.validator_for(
        _response_schema(schema, method, path, response.status_code)
    )
    errors = [e.message for e in validator.iter_errors(response.json())]
    assert errors == [], (response.status_code, response.content)


@pytest.mark.parametrize(
    "url",
    [
        "/api/agents/%C3%84%C3%96x",  # not a slug: no route matches
        "/api/subscriptions/not-a-number",
        "/api/executions/not-a-uuid",
        "/api/no-such-endpoint",
    ],
)
def test_an_api_path_no_route_matches_answers_json_404(
    admin_client_api: APIClient, url: str
) -> None:
    response = admin_client_api.get(url)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found.", "code": "not_found"}


def test_a_path_outside_the_api_keeps_djangos_404_page(admin_client_api: APIClient) -> None:
    response = admin_client_api.get("/no-such-page")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        # DRF parses an empty form body itself, without a parser: the field rules apply.
        ("application/x-www-form-urlencoded", "", 400),
        ("multipart/form-data; boundary=BoUnDaRy", "", 400),
        ("application/x-www-form-urlencoded", "enabled=false", 415),
        ("multipart/form-data; boundary=BoUnDaRy", "--BoUnDaRy--\r\n", 415),
    ],
)
def test_a_form_body_cannot_turn_a_switch_off(
    admin_client_api: APIClient, content_type: str, body: str, status: int
) -> None:
    """A form's missing checkbox reads as False in DRF: an empty form PUT turned
    auto-switch off. The API parses JSON only, and a switch is read only from what
    was sent."""
    assert system_settings_get().auto_switch_subscriptions is True
    response = admin_client_api.generic(
        "PUT", "/api/subscriptions/settings/auto-switch", body, content_type=content_type
    )
    assert response.status_code == status
    if status == 400:
        assert set(response.json()) == {"enabled"}
    assert system_settings_get().auto_switch_subscriptions is True


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=BoUnDaRy"]
)
def test_an_empty_form_patch_leaves_a_notification_channel_enabled(
    admin_client_api: APIClient, content_type: str
) -> None:
    """The same form quirk on a PATCH, where every field is optional: an empty form
    body read ``enabled`` as False and silenced the channel."""
    channel = notification_channel_create(
        name="hook", kind="json", url="https://hooks.example.test/h/abc", now=clock.now()
    )
    response = admin_client_api.generic(
        "PATCH", f"/api/notification-channels/{channel.pk}", "", content_type=content_type
    )
    assert response.status_code == 200
    assert response.json()["enabled"] is True
    channel.refresh_from_db()
    assert channel.enabled is True


def test_the_schema_offers_json_request_bodies_only(schema: dict[str, Any]) -> None:
    offered = {
        media_type
        for operations in schema["paths"].values()
        for operation in operations.values()
        for media_type in operation.get("requestBody", {}).get("content", {})
    }
    assert offered == {"application/json"}


def test_a_list_items_field_errors_match_the_documented_400(
    schema: dict[str, Any], owner_client: APIClient
) -> None:
    """DRF nests a list item's errors under its index: ``{ids: {0: [...]}}``."""
    response = owner_client.post("/api/notifications/mark-read", {"ids": [0, -1]})
    assert response.status_code == 400
    assert set(response.json()["ids"]) == {"0", "1"}
    _conforms(schema, "post", "/api/notifications/mark-read", response)


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("post", "/api/agents", "409"),  # the name is taken
        ("post", "/api/subscriptions", "409"),  # a provider change under assigned agents
        ("put", "/api/subscriptions/agents/{name}", "409"),  # reassigned meanwhile
        ("post", "/api/auth/tokens", "404"),  # no such user
        ("post", "/api/subscriptions/{id}/usage/refresh", "429"),  # probed too recently
    ],
)
def test_each_error_an_operation_can_answer_is_documented(
    schema: dict[str, Any], method: str, path: str, code: str
) -> None:
    assert code in schema["paths"][path][method]["responses"]


def test_a_taken_agent_name_answers_the_documented_409(
    schema: dict[str, Any], owner_client: APIClient, owner: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    response = owner_client.post("/api/agents", {"name": "bot", "auto_assign": False})
    assert response.status_code == 409
    _conforms(schema, "post", "/api/agents", response)


def test_an_unknown_user_s_token_answers_the_documented_404(
    schema: dict[str, Any], admin_client_api: APIClient
) -> None:
    response = admin_client_api.post("/api/auth/tokens", {"username": "nobody"})
    assert response.status_code == 404
    _conforms(schema, "post", "/api/auth/tokens", response)


@pytest.mark.parametrize("query", ["unread=", "unread=maybe", "unread=yes", "level=", "level=loud"])
def test_a_notification_filter_that_is_not_a_boolean_is_a_400_naming_it(
    owner_client: APIClient, query: str
) -> None:
    """``?unread=`` was read as no filter at all, though the schema says boolean."""
    response = owner_client.get(f"/api/notifications?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {query.split("=")[0]}


@pytest.mark.parametrize("query", ["status=", "status=done"])
def test_an_execution_status_filter_out_of_its_enum_is_a_400(
    owner_client: APIClient, query: str
) -> None:
    response = owner_client.get(f"/api/executions?{query}")
    assert response.status_code == 400
    assert set(response.json()) == {"status"}


@pytest.mark.parametrize("path", ["/api/notifications", "/api/executions"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_an_empty_time_bound_is_a_400_naming_it(
    owner_client: APIClient, path: str, name: str
) -> None:
    """``?until=`` is no instant (schemathesis, ST201: it was read as none given)."""
    response = owner_client.get(f"{path}?{name}=")
    assert response.status_code == 400
    assert set(response.json()) == {name}


@pytest.mark.parametrize("path", ["/api/notifications", "/api/executions"])
@pytest.mark.parametrize("value", ["", "ten", "2.5", "0", "-3"])
def test_a_page_size_that_is_no_positive_whole_number_is_a_400_naming_it(
    owner_client: APIClient, path: str, value: str
) -> None:
    """``?limit=`` was quietly read as the default page (schemathesis, ST201)."""
    response = owner_client.get(f"{path}?limit={value}")
    assert response.status_code == 400
    assert set(response.json()) == {"limit"}
    assert owner_client.get(f"{path}?limit=500").status_code == 200  # read as the maximum


@pytest.mark.parametrize("value", ["xml", "", "CSV"])
def test_a_usage_report_in_an_unknown_format_is_a_400_naming_it(
    owner_client: APIClient, value: str
) -> None:
    """DRF answers an unknown ``?format=`` with a bare 404, and reads an empty one as
    none given (schemathesis, ST201), neither of which the report documents; like its
    other parameters, a bad one is a 400 naming it."""
    response = owner_client.get(f"/api/reports/usage?format={value}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"format"}


def test_unassigning_answers_the_documented_200_with_the_assignment(
    schema: dict[str, Any], owner_client: APIClient, owner: Any
) -> None:
    """drf-spectacular documents a DELETE's body as a 204; this one answers 200."""
    AgentFactory.create(name="bot", owner=owner)
    response = owner_client.delete("/api/subscriptions/agents/bot")
    assert response.status_code == 200
    _conforms(schema, "delete", "/api/subscriptions/agents/{name}", response)


@pytest.mark.parametrize("value", [42, -4.8e16, 1.5])
def test_a_number_where_the_schema_says_string_is_a_400_naming_the_field(
    owner_client: APIClient, value: Any
) -> None:
    """DRF's CharField turned numbers into strings: a model named "-4.8e+16" was kept."""
    response = owner_client.post("/api/agents", {"name": "bot", "model": value})
    assert response.status_code == 400
    assert set(response.json()) == {"model"}
    response = owner_client.post("/api/agents", {"name": value})
    assert response.status_code == 400
    assert set(response.json()) == {"name"}


@pytest.mark.parametrize("path", ["/api/agents/{name}/task", "/api/agents/{name}/chat"])
def test_every_status_a_failed_turn_answers_is_documented_with_its_execution(
    schema: dict[str, Any], path: str
) -> None:
    """A turn on an agent with no credential answered an undocumented 503."""
    from execution.api import ERROR_HTTP_STATUS

    responses = schema["paths"][path]["post"]["responses"]
    for code in {*ERROR_HTTP_STATUS.values(), 503} - {400}:
        body = responses[str(code)]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/ExecutionOutput"}, code


def test_every_boolean_field_reads_a_missing_form_value_as_missing() -> None:
    """The form quirk is fixed once for every boolean, including ones written later:
    one missing from a form body is left out (or takes its own default), never False."""
    from django.http import QueryDict
    from rest_framework import serializers

    class Later(serializers.Serializer[Any]):
        flag = serializers.BooleanField(required=False)
        on_by_default = serializers.BooleanField(default=True)

    form = Later(data=QueryDict(""))
    assert form.is_valid(), form.errors
    assert form.validated_data == {"on_by_default": True}


def _typed_query_parameters(schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(path, parameter, a value its schema refuses) for every typed query parameter of
    every list the schema describes (paths without path parameters)."""
    wrong = {"integer": ["", "x"], "boolean": ["", "maybe"], "number": ["x"]}
    found = []
    for path, operations in schema["paths"].items():
        if "{" in path or "get" not in operations:
            continue
        for parameter in operations["get"].get("parameters", []):
            if parameter["in"] != "query":
                continue
            typed = parameter.get("schema", {})
            values = list(wrong.get(typed.get("type", ""), []))
            if typed.get("format") == "date-time":
                values += ["", "not-an-instant"]
            if "enum" in typed:
                values += ["zzz-not-one-of-them"]
            found += [(path, parameter["name"], value) for value in values]
    return found


def test_every_typed_query_parameter_refuses_a_value_its_schema_refuses(
    admin_client_api: APIClient,
) -> None:
    """The class of schemathesis' ST201 findings (an empty ``?until=``, ``?limit=x``,
    ``?format=``) checked for every list at once, not one draw at a time: a value the
    schema refuses is a 400 naming the parameter, never the default quietly."""
    schema = admin_client_api.get("/api/schema/?format=json").json()
    cases = _typed_query_parameters(schema)
    assert len(cases) >= 18  # the lists' limit, since, until, filters...
    accepted = [
        (path, name, value, response.status_code)
        for path, name, value in cases
        if (response := admin_client_api.get(path, {name: value})).status_code < 400
    ]
    assert accepted == []


def test_an_empty_or_wrong_query_value_on_an_objects_view_is_a_400_naming_it(
    admin_client_api: APIClient, admin_user: Any
) -> None:
    """The two typed query parameters of views under a path parameter (the check above
    covers the lists): an empty ``?autonomous=`` or ``?window=`` was the default."""
    from tests.agents.factories import AgentFactory
    from tests.subscriptions.factories import SubscriptionFactory

    AgentFactory.create(name="bot", owner=admin_user)
    plan = SubscriptionFactory.create()
    for url, name in [
        ("/api/agents/bot/routing?autonomous=", "autonomous"),
        ("/api/agents/bot/routing?autonomous=maybe", "autonomous"),
        (f"/api/subscriptions/{plan.pk}/headroom/history?window=", "window"),
        (f"/api/subscriptions/{plan.pk}/headroom/history?window=1y", "window"),
    ]:
        response = admin_client_api.get(url)
        assert response.status_code == 400, url
        assert set(response.json()) == {name}, url
    assert admin_client_api.get("/api/agents/bot/routing?autonomous=true").status_code == 200
    history = admin_client_api.get(f"/api/subscriptions/{plan.pk}/headroom/history")
    assert history.status_code == 200 and history.json()["window"] == "24h"
