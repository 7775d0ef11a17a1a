"""The subscriptions' and platform settings' write routes, for the audit log
(``trinity/audit/registry.py``)."""

from __future__ import annotations

from typing import Any

from agents.models import Agent
from subscriptions.models import Subscription
from trinity.audit.registry import Target, register
from trinity.models import SystemSettings


def _by_pk(kwargs: Any) -> Any:
    return Subscription.objects.filter(pk=kwargs["pk"])


def _created(data: Any) -> Subscription | None:
    if not isinstance(data, dict) or "id" not in data:
        return None
    return Subscription.objects.filter(pk=data["id"]).first()


def _settings(kwargs: Any) -> Any:
    return SystemSettings.objects.all()


def _settings_made(data: Any) -> SystemSettings | None:
    # The row is made on its first read: a first change finds none before the view.
    return SystemSettings.objects.first()


def _agent(kwargs: Any) -> Any:
    return Agent.objects.filter(name=kwargs["name"]).order_by("pk")


register("subscription-list", Target("subscription", created=_created))
register("subscription-detail", Target("subscription", candidates=_by_pk))
register("subscription-retry", Target("subscription", verb="retry", candidates=_by_pk))
register(
    "subscription-usage-refresh", Target("subscription", verb="usage_refresh", candidates=_by_pk)
)
register("subscription-assignment", Target("agent_assignment", candidates=_agent))
# A plan's sign-in from the panel: its start changes no row (the flow lives in the
# cache); the pasted code registers the plan (or signs an existing one in again).
register(
    "subscription-sign-in",
    Target("subscription", action="subscription.sign_in_start"),
)
register(
    "subscription-sign-in-code",
    Target("subscription", verb="sign_in", created=_created),
)
# ChatGPT's device-code sign-in: the start changes no row; a poll that finds the code
# entered registers the plan, one still waiting (202) changed nothing and is not kept.
register(
    "subscription-sign-in-device",
    Target("subscription", action="subscription.sign_in_device_start"),
)
register(
    "subscription-sign-in-poll",
    Target("subscription", verb="sign_in", created=_created, unrecorded_statuses=frozenset({202})),
)
for route in (
    "settings-auto-switch",
    "settings-api-key-fallback",
    "settings-headroom-auto-refresh",
    "settings-headroom-alert-threshold",
    "settings-routing",
):
    register(route, Target("settings", candidates=_settings, created=_settings_made))
for route, kind in (
    ("platform-api-key", "platform_api_key"),
    ("openai-platform-key", "openai_platform_api_key"),
):
    register(route, Target(kind, candidates=_settings, created=_settings_made))
    register(
        f"{route}-retry", Target(kind, verb="retry", candidates=_settings, created=_settings_made)
    )
register(
    "openai-platform-key-budgets",
    Target("openai_key_budgets", candidates=_settings, created=_settings_made),
)
