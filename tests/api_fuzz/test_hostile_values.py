"""Hostile values on every write endpoint: each answered by a 4xx that names the field,
with every table's rows exactly as before.

One row per write operation the schema describes (a completeness test keeps the table
covering them all): a valid body, and the kind of each field. Every field then gets
the hostile values of its kind, one at a time, in an otherwise valid body: wrong
types, oversized strings (1 MB), NUL and control characters, path traversal, SQL- and
shell-shaped strings, bidi overrides, negative and huge numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.agents.factories import AgentFactory
from tests.api_fuzz.support import database_fingerprint
from tests.gateway.factories import GatewayKeyFactory
from tests.subscriptions.factories import SubscriptionFactory

pytestmark = pytest.mark.django_db

MEGABYTE = "x" * 1_000_000

WRONG_TYPES: list[tuple[str, Any]] = [("a list", ["x"]), ("an object", {"x": 1})]
TEXT: list[tuple[str, Any]] = [
    *WRONG_TYPES,
    ("a number", 42),
    ("a boolean", True),
    ("a NUL character", "a\x00b"),
    ("1 MB", MEGABYTE),
]
NAME: list[tuple[str, Any]] = [
    *TEXT,
    ("path traversal", "../../etc/passwd"),
    ("an absolute path", "/etc/passwd"),
    ("SQL", "x'; DROP TABLE agents_agent; --"),
    ("shell", "$(rm -rf /)"),
    ("a newline and an escape", "bad\nname\x1b[31m"),
    ("a bidi override", "evil\u202egnp.exe"),
    ("empty", ""),
]
CHOICE: list[tuple[str, Any]] = [
    *WRONG_TYPES,
    ("unknown", "no-such-choice"),
    ("SQL", "' OR 1=1 --"),
    ("a NUL character", "thrifty\x00"),
]
INTEGER: list[tuple[str, Any]] = [
    *WRONG_TYPES,
    ("a word", "ten"),
    ("a float", 1.5),
    ("negative", -1),
    ("huge", 10**30),
    ("SQL", "1 OR 1=1"),
]
TIMEOUT: list[tuple[str, Any]] = [*INTEGER, ("zero", 0), ("a year", 365 * 24 * 3600)]
MAX_WAIT: list[tuple[str, Any]] = [*INTEGER, ("a week and a second", 7 * 24 * 3600 + 1)]
USD: list[tuple[str, Any]] = [
    *WRONG_TYPES,
    ("a word", "ten"),
    ("a boolean", True),
    ("negative", "-0.01"),
    ("a tenth of a cent", "0.001"),
    ("huge", "1e20"),
    ("not a number", "NaN"),
    ("infinite", "Infinity"),
    ("SQL", "1 OR 1=1"),
]
# A gateway key's dollar limits: the column's four places, and more than nothing.
GATEWAY_USD: list[tuple[str, Any]] = [
    *[(label, value) for label, value in USD if label != "a tenth of a cent"],
    ("zero", "0"),
    ("a hundredth of a cent", "0.00001"),
]
LIMIT: list[tuple[str, Any]] = [*INTEGER, ("zero", 0)]
INSTANT: list[tuple[str, Any]] = [
    *WRONG_TYPES,
    ("a number", 42),
    ("a word", "soon"),
    ("the past", "2001-01-01T00:00:00Z"),
    ("a NUL character", "2099-01-01T00:00:00Z\x00"),
    ("without its offset", "2099-01-01T00:00:00"),
    ("past the calendar", "9999-12-31T23:59:59-10:00"),
]
BOOLEAN: list[tuple[str, Any]] = [*WRONG_TYPES, ("a word", "maybe"), ("a number", 2)]
ID_LIST: list[tuple[str, Any]] = [
    ("a string", "1,2"),
    ("an object", {"x": 1}),
    ("negative ids", [-1]),
    ("huge ids", [10**30]),
    ("too many", list(range(1, 1002))),
    ("words", ["one"]),
]
TOOLS: list[tuple[str, Any]] = [
    ("a string", "Read"),
    ("an object", {"x": 1}),
    ("an unknown tool", ["Read", "Sudo"]),
    ("a permission rule", ["Bash(rm:*)"]),
    ("a tool twice", ["Read", "Read"]),
    ("a NUL character", ["Read\x00"]),
]
PROVIDER_LIST: list[tuple[str, Any]] = [
    ("a string", "anthropic"),
    ("an object", {"x": 1}),
    ("null", None),
    ("an unknown provider", ["anthropic", "mistral"]),
    ("a provider twice", ["anthropic", "anthropic"]),
    ("a NUL character", ["anthropic\x00"]),
]
FAMILY_LIST: list[tuple[str, Any]] = [
    ("a string", "opus"),
    ("an object", {"x": 1}),
    ("an unknown family", ["opus", "gemini"]),
    ("a family twice", ["opus", "opus"]),
    ("SQL", ["' OR 1=1 --"]),
]
PLACEMENT: list[tuple[str, Any]] = [
    ("a string", "trinity.pool=gpu-less"),
    ("a list", [["trinity.pool", "gpu-less"]]),
    ("null", None),
    ("nine labels", {f"l{i}": "v" for i in range(9)}),
    ("a number value", {"trinity.pool": 1}),
    ("an empty value", {"trinity.pool": ""}),
    ("an empty name", {"": "gpu-less"}),
    ("a second constraint", {"trinity.pool": "gpu,node.role==manager"}),
    ("an operator in the name", {"trinity.pool==gpu": "x"}),
    ("a newline", {"trinity.pool": "gpu\nnode.role==manager"}),
    ("a NUL character", {"trinity.pool": "gpu\x00"}),
    ("a NUL character in the name", {"pool\x00": "gpu"}),
    ("a bidi override", {"trinity.pool": "evil\u202egnp"}),
    ("1 MB", {"trinity.pool": MEGABYTE}),
]
KINDS = {
    "name": NAME,
    "text": TEXT,
    "choice": CHOICE,
    "integer": INTEGER,
    "timeout": TIMEOUT,
    "boolean": BOOLEAN,
    "ids": ID_LIST,
    "max_wait": MAX_WAIT,
    "usd": USD,
    "tools": TOOLS,
    "gateway_usd": GATEWAY_USD,
    "limit": LIMIT,
    "instant": INSTANT,
    "providers": PROVIDER_LIST,
    "families": FAMILY_LIST,
    "placement": PLACEMENT,
}


@dataclass
class Row:
    method: str
    path: str  # as the schema names it
    body: dict[str, Any]
    fields: dict[str, str]  # field -> kind
    client: str = "admin"
    failures: list[str] = field(default_factory=list)
    # Which seeded object the path's ``{id}`` names.
    id_of: str = "{id}"


ROWS = [
    Row(
        "post",
        "/api/agents",
        {"name": "new-bot", "auto_assign": False},
        {
            "name": "name",
            "model": "text",
            "runtime": "choice",
            "routing_policy": "choice",
            "use_platform_api_key": "boolean",
            "auto_assign": "boolean",
            "wait_policy": "choice",
            "max_wait_seconds": "max_wait",
            "key_budget_daily_usd": "usd",
            "key_budget_monthly_usd": "usd",
            "admin_key_budget_daily_usd": "usd",
            "admin_key_budget_monthly_usd": "usd",
            "allowed_tools": "tools",
            "placement": "placement",
        },
    ),
    Row(
        "patch",
        "/api/agents/{name}",
        {"model": "claude-sonnet-4-5"},
        {
            "model": "text",
            "runtime": "choice",
            "routing_policy": "choice",
            "use_platform_api_key": "boolean",
            "wait_policy": "choice",
            "max_wait_seconds": "max_wait",
            "key_budget_daily_usd": "usd",
            "key_budget_monthly_usd": "usd",
            "admin_key_budget_daily_usd": "usd",
            "admin_key_budget_monthly_usd": "usd",
            "allowed_tools": "tools",
            "placement": "placement",
        },
    ),
    Row(
        "put",
        "/api/agents/{name}",
        {"model": "claude-sonnet-4-5"},
        {
            "model": "text",
            "runtime": "choice",
            "routing_policy": "choice",
            "max_wait_seconds": "max_wait",
            "key_budget_daily_usd": "usd",
            "placement": "placement",
        },
    ),
    Row(
        "post",
        "/api/agents/{name}/task",
        {"message": "hi"},
        {
            "message": "text",
            "model": "text",
            "timeout_seconds": "timeout",
            "async": "boolean",
            "trigger": "choice",
        },
    ),
    Row(
        "post",
        "/api/agents/{name}/chat",
        {"message": "hi"},
        {"message": "text", "session_id": "name", "model": "text", "timeout_seconds": "timeout"},
    ),
    Row(
        "post",
        "/api/agents/{name}/schedules",
        {"name": "fuzzed", "cron": "0 3 * * *", "message": "hi"},
        {
            "name": "name",
            "cron": "name",
            "message": "text",
            "model": "text",
            "enabled": "boolean",
        },
    ),
    Row(
        "patch",
        "/api/agents/{name}/schedules/{schedule}",
        {"enabled": True},
        {
            "name": "name",
            "cron": "name",
            "message": "text",
            "model": "text",
            "enabled": "boolean",
        },
    ),
    Row(
        "post",
        "/api/subscriptions",
        {
            "name": "plan-b",
            "provider": "anthropic",
            "plan_type": "max-5x",
            "token": "sk-ant-oat01-" + "a" * 40,
        },
        {"name": "name", "provider": "choice", "plan_type": "choice", "token": "text"},
    ),
    Row(
        "post",
        "/api/subscriptions/sign-in",
        {"provider": "claude", "name": "plan-s", "plan_type": "max-5x"},
        {"provider": "choice", "name": "name", "plan_type": "choice"},
    ),
    # Judged before the provider is asked for a device code.
    Row(
        "post",
        "/api/subscriptions/sign-in/device",
        {"name": "plan-d", "plan_type": "pro"},
        {"name": "name", "plan_type": "choice"},
    ),
    # An unknown flow: what is pasted is judged before the flow is looked up.
    Row(
        "post",
        "/api/subscriptions/sign-in/{flow}/code",
        {"pasted": "code#state"},
        {"pasted": "text"},
    ),
    Row(
        "patch",
        "/api/subscriptions/{id}",
        {"paused": True},
        {"paused": "boolean"},
        id_of="{subscription}",
    ),
    Row(
        "put",
        "/api/subscriptions/agents/{name}",
        {"subscription_id": 0},
        {"subscription_id": "integer"},
    ),
    Row(
        "put", "/api/subscriptions/settings/auto-switch", {"enabled": True}, {"enabled": "boolean"}
    ),
    Row(
        "put",
        "/api/subscriptions/settings/api-key-fallback",
        {"enabled": True},
        {"enabled": "boolean"},
    ),
    Row(
        "put",
        "/api/subscriptions/settings/headroom-auto-refresh",
        {"enabled": True},
        {"enabled": "boolean"},
    ),
    Row(
        "put",
        "/api/subscriptions/settings/routing",
        {"routing_strategy": "balanced"},
        {
            "default_routing_policy": "choice",
            "routing_strategy": "choice",
            "key_budget_daily_usd": "usd",
            "key_budget_monthly_usd": "usd",
        },
    ),
    Row(
        "put",
        "/api/subscriptions/settings/headroom-alert-threshold",
        {"threshold": 80},
        {"threshold": "integer"},
    ),
    Row(
        "put",
        "/api/settings/platform-api-key",
        {"key": "sk-ant-api03-" + "b" * 40},
        {"key": "text"},
    ),
    Row(
        "put",
        "/api/settings/platform-api-key/openai-codex",
        {"key": "sk-proj-" + "b" * 40},
        {"key": "text"},
    ),
    Row(
        "put",
        "/api/settings/platform-api-key/openai-codex/budgets",
        {"key_budget_daily_usd": "1.00"},
        {"key_budget_daily_usd": "usd", "key_budget_monthly_usd": "usd"},
    ),
    Row(
        "post", "/api/auth/tokens", {"username": "owner"}, {"username": "name", "rotate": "boolean"}
    ),
    Row(
        "post",
        "/api/notifications/mark-read",
        {"all": True},
        {"ids": "ids", "all": "boolean"},
        client="owner",
    ),
    Row(
        "post",
        "/api/gateway/keys",
        {"name": "new-key"},
        {
            "name": "name",
            "owner": "name",
            "expires_at": "instant",
            "providers": "providers",
            "model_families": "families",
            "requests_per_minute": "limit",
            "max_streams": "limit",
            "daily_tokens": "limit",
            "monthly_tokens": "limit",
            "daily_usd": "gateway_usd",
            "monthly_usd": "gateway_usd",
        },
    ),
    Row(
        "patch",
        "/api/gateway/keys/{id}",
        {"name": "renamed"},
        {
            "name": "name",
            "expires_at": "instant",
            "providers": "providers",
            "model_families": "families",
            "requests_per_minute": "limit",
            "max_streams": "limit",
            "daily_tokens": "limit",
            "monthly_tokens": "limit",
            "daily_usd": "gateway_usd",
            "monthly_usd": "gateway_usd",
        },
        id_of="{gateway_key}",
    ),
    Row(
        "post",
        "/api/notification-channels",
        {"name": "hook-b", "kind": "json", "url": "https://hooks.example.invalid/b"},
        {
            "name": "name",
            "kind": "choice",
            "url": "text",
            "min_level": "choice",
            "enabled": "boolean",
        },
    ),
    Row(
        "patch",
        "/api/notification-channels/{id}",
        {"enabled": True},
        {
            "name": "name",
            "kind": "choice",
            "url": "text",
            "min_level": "choice",
            "enabled": "boolean",
        },
    ),
]


def _write_operations() -> set[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method, path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method in ("post", "put", "patch") and "requestBody" in operation
    }


def test_the_table_covers_every_write_operation_with_a_body() -> None:
    assert _write_operations() == {(row.method, row.path) for row in ROWS}


@pytest.fixture
def seeded(owner: Any, admin_user: Any) -> dict[str, Any]:
    from execution.schedules.services import schedule_create
    from trinity import clock
    from trinity.notification_channels import notification_channel_create

    subscription = SubscriptionFactory.create(name="plan-a")
    agent = AgentFactory.create(name="bot", owner=owner, subscription=subscription)
    schedule_create(agent=agent, name="nightly", cron="0 3 * * *", message="hi", now=clock.now())
    channel = notification_channel_create(
        name="hook-a", kind="json", url="https://hooks.example.invalid/a", now=clock.now()
    )
    gateway_key = GatewayKeyFactory.create(owner=admin_user, name="kept")
    return {
        "{name}": "bot",
        "{id}": str(channel.pk),
        "{gateway_key}": str(gateway_key.pk),
        "{schedule}": "nightly",
        "{flow}": "no-such-flow",
        "{subscription}": str(subscription.pk),
        "subscription_id": subscription.pk,
    }


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.method.upper()} {r.path}" for r in ROWS])
def test_every_hostile_value_is_a_4xx_naming_the_field_and_writes_nothing(
    row: Row,
    seeded: dict[str, str],
    admin_client_api: APIClient,
    owner_client: APIClient,
) -> None:
    client = admin_client_api if row.client == "admin" else owner_client
    url = row.path.replace("{id}", seeded[row.id_of])
    for placeholder in ("{name}", "{schedule}", "{flow}"):
        url = url.replace(placeholder, seeded[placeholder])
    base = {k: seeded.get(k, v) if k == "subscription_id" else v for k, v in row.body.items()}
    failures = []
    tried = 0
    for name, kind in row.fields.items():
        for label, value in KINDS[kind]:
            body = {**base, name: value}
            before = database_fingerprint()
            response = getattr(client, row.method)(url, body, format="json")
            tried += 1
            after = database_fingerprint()
            written = sorted(t for t in after if before[t] != after[t])
            answer = response.content[:200].decode(errors="replace")
            if not 400 <= response.status_code < 500:
                failures.append(f"{name} = {label}: {response.status_code} {answer}")
            elif name not in response.json():
                failures.append(f"{name} = {label}: {response.status_code} names {answer}")
            if written:
                failures.append(f"{name} = {label}: wrote {written}")
    assert tried > 0
    assert failures == [], "\n".join(failures)
