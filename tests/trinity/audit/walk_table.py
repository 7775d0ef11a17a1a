"""The audit walk's table: one valid request per write operation of the schema.

Each row names the operation (method and path template, as /api/schema/ spells it),
the URL to send (placeholders from the walk's world), a body, who sends it and how
(``admin`` / ``operator`` by session, ``admin_token`` / ``operator_token`` by API
token), and the action the entry must carry. A write operation with no row fails
the walk: add one here (the lead appends rows for new endpoints at merge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Plain-looking secrets the walk plants; none may reach an audit entry.
CANARY_PLAN = "sk-ant-oat01-AUDITcanaryPLANtoken0000000000000000001"
CANARY_PLAN_2 = "sk-ant-oat01-AUDITcanaryPLANtoken0000000000000000002"
CANARY_KEY = "sk-ant-api03-AUDITcanaryPLATFORMkey000000000000000003"
CANARY_OPENAI = "sk-proj-AUDITcanaryOPENAIkey0000000000000000000000004"
CANARY_HOOK = "https://hooks.example.invalid/AUDITcanaryHOOKpath0000005"
CANARY_HOOK_2 = "https://hooks.example.invalid/AUDITcanaryHOOKpath0000006"

# Never walked: a turn is recorded by its Execution row (trinity/audit/middleware.py).
TURN_OPERATIONS = {("post", "/api/agents/{name}/task"), ("post", "/api/agents/{name}/chat")}


@dataclass(frozen=True)
class Row:
    method: str
    template: str
    action: str
    url: str = ""  # the template when empty
    body: dict[str, Any] = field(default_factory=dict)
    who: str = "admin"


ROWS: list[Row] = [
    # Creates first, then changes, retries and tests, deletes last.
    Row(
        "post",
        "/api/subscriptions",
        "subscription.create",
        body={
            "name": "plan-new",
            "provider": "anthropic",
            "plan_type": "max-5x",
            "token": CANARY_PLAN_2,
        },
    ),
    # A plan signed in from the panel: a flow started, then the world's own flow's code
    # (signed in at the simulator's page) pasted back.
    Row(
        "post",
        "/api/subscriptions/sign-in",
        "subscription.sign_in_start",
        body={"provider": "claude", "name": "plan-started", "plan_type": "max-5x"},
    ),
    Row(
        "post",
        "/api/subscriptions/sign-in/{flow}/code",
        "subscription.sign_in",
        body={"pasted": "{pasted}"},
    ),
    # ChatGPT's device-code sign-in: a flow started, then the world's own device flow
    # (its code entered at the simulator's device page) polled to its plan.
    Row(
        "post",
        "/api/subscriptions/sign-in/device",
        "subscription.sign_in_device_start",
        body={"name": "plan-device-started", "plan_type": "pro"},
    ),
    Row(
        "post",
        "/api/subscriptions/sign-in/{flow}/poll",
        "subscription.sign_in",
        url="/api/subscriptions/sign-in/{device_flow}/poll",
    ),
    Row(
        "post",
        "/api/agents",
        "agent.create",
        body={"name": "fresh", "auto_assign": False},
        who="operator",
    ),
    Row(
        "post",
        "/api/agents/{name}/schedules",
        "schedule.create",
        url="/api/agents/bot/schedules",
        body={"name": "hourly", "cron": "0 * * * *", "message": "hi"},
        who="operator_token",
    ),
    Row("post", "/api/auth/tokens", "api_token.create", body={"username": "alpha"}),
    Row(
        "post", "/api/gateway/keys", "gateway_key.create", body={"name": "new-key"}, who="operator"
    ),
    Row(
        "post",
        "/api/notification-channels",
        "notification_channel.create",
        body={"name": "hook-b", "kind": "json", "url": CANARY_HOOK_2},
    ),
    Row(
        "put",
        "/api/agents/{name}",
        "agent.update",
        url="/api/agents/bot",
        body={"model": "claude-sonnet-4-5"},
        who="operator",
    ),
    Row(
        "patch",
        "/api/agents/{name}",
        "agent.update",
        url="/api/agents/bot",
        body={"key_budget_daily_usd": "2.50"},
        who="operator_token",
    ),
    Row(
        "patch",
        "/api/agents/{name}/schedules/{schedule}",
        "schedule.update",
        url="/api/agents/bot/schedules/nightly",
        body={"enabled": False},
        who="operator",
    ),
    Row(
        "post",
        "/api/agents/{name}/start",
        "agent.start",
        url="/api/agents/bot/start",
        who="operator",
    ),
    Row(
        "post", "/api/agents/{name}/stop", "agent.stop", url="/api/agents/bot/stop", who="operator"
    ),
    Row(
        "post",
        "/api/executions/{id}/cancel",
        "execution.cancel",
        url="/api/executions/{turn}/cancel",
        who="operator",
    ),
    Row(
        "patch",
        "/api/gateway/keys/{id}",
        "gateway_key.update",
        url="/api/gateway/keys/{gw_key}",
        body={"name": "renamed"},
        who="operator",
    ),
    Row(
        "patch",
        "/api/notification-channels/{id}",
        "notification_channel.update",
        url="/api/notification-channels/{channel}",
        body={"enabled": False},
    ),
    Row(
        "post",
        "/api/notification-channels/{id}/test",
        "notification_channel.test",
        url="/api/notification-channels/{channel}/test",
    ),
    Row(
        "post",
        "/api/notifications/mark-read",
        "notifications.mark_read",
        body={"all": True},
        who="operator",
    ),
    Row(
        "put",
        "/api/settings/platform-api-key",
        "platform_api_key.update",
        body={"key": CANARY_KEY},
        who="admin_token",
    ),
    Row("post", "/api/settings/platform-api-key/retry", "platform_api_key.retry"),
    Row(
        "put",
        "/api/settings/platform-api-key/openai-codex",
        "openai_platform_api_key.update",
        body={"key": CANARY_OPENAI},
    ),
    Row(
        "put",
        "/api/settings/platform-api-key/openai-codex/budgets",
        "openai_key_budgets.update",
        body={"key_budget_daily_usd": "1.00"},
    ),
    Row(
        "post", "/api/settings/platform-api-key/openai-codex/retry", "openai_platform_api_key.retry"
    ),
    Row(
        "patch",
        "/api/subscriptions/{id}",
        "subscription.update",
        url="/api/subscriptions/{plan}",
        body={"paused": True},
        who="admin_token",
    ),
    # Before the retry: a retry reads the usage too, and a refresh right after is a 429.
    Row(
        "post",
        "/api/subscriptions/{id}/usage/refresh",
        "subscription.usage_refresh",
        url="/api/subscriptions/{plan}/usage/refresh",
        who="operator",
    ),
    Row(
        "post",
        "/api/subscriptions/{id}/retry",
        "subscription.retry",
        url="/api/subscriptions/{plan}/retry",
    ),
    Row(
        "put",
        "/api/subscriptions/agents/{name}",
        "agent_assignment.update",
        url="/api/subscriptions/agents/bot",
        body={"subscription_id": "{plan}"},
    ),
    Row(
        "put",
        "/api/subscriptions/settings/api-key-fallback",
        "settings.update",
        body={"enabled": True},
    ),
    Row(
        "put", "/api/subscriptions/settings/auto-switch", "settings.update", body={"enabled": False}
    ),
    Row(
        "put",
        "/api/subscriptions/settings/headroom-alert-threshold",
        "settings.update",
        body={"threshold": 85},
    ),
    Row(
        "put",
        "/api/subscriptions/settings/headroom-auto-refresh",
        "settings.update",
        body={"enabled": False},
    ),
    Row(
        "put",
        "/api/subscriptions/settings/routing",
        "settings.update",
        body={"routing_strategy": "balanced"},
        who="admin_token",
    ),
    Row(
        "delete",
        "/api/subscriptions/agents/{name}",
        "agent_assignment.delete",
        url="/api/subscriptions/agents/bot",
    ),
    Row(
        "delete",
        "/api/agents/{name}/schedules/{schedule}",
        "schedule.delete",
        url="/api/agents/bot/schedules/nightly",
        who="operator",
    ),
    Row(
        "delete",
        "/api/gateway/keys/{id}",
        "gateway_key.delete",
        url="/api/gateway/keys/{gw_key}",
        who="operator",
    ),
    Row(
        "delete",
        "/api/notification-channels/{id}",
        "notification_channel.delete",
        url="/api/notification-channels/{channel}",
    ),
    Row("delete", "/api/settings/platform-api-key", "platform_api_key.delete"),
    Row("delete", "/api/settings/platform-api-key/openai-codex", "openai_platform_api_key.delete"),
    Row(
        "delete",
        "/api/subscriptions/{id}",
        "subscription.delete",
        url="/api/subscriptions/{spare_plan}",
    ),
    Row("delete", "/api/agents/{name}", "agent.delete", url="/api/agents/doomed", who="operator"),
]
