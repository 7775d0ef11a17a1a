from __future__ import annotations

from django.contrib import admin

from agents.models import Agent


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin[Agent]):
    # The agent-server secret is never shown.
    list_display = ["name", "owner", "runtime", "model", "subscription", "use_platform_api_key"]
    list_filter = ["runtime", "routing_policy"]
    search_fields = ["name"]
    fields = [
        "name",
        "owner",
        "runtime",
        "model",
        "subscription",
        "use_platform_api_key",
        "routing_policy",
        "key_budget_daily_usd",
        "key_budget_monthly_usd",
        # The admin's caps: the owner's own pair can only go below them.
        "admin_key_budget_daily_usd",
        "admin_key_budget_monthly_usd",
        # Node labels for the swarm runtime; validated as the API validates them.
        "placement",
        "endpoint",
        # What the runtime names its resources by (home, socket, container): fixed, so
        # renaming an agent or changing its owner here moves nothing.
        "runtime_key",
        "created_at",
        "updated_at",
    ]
    readonly_fields = ["endpoint", "runtime_key", "created_at", "updated_at"]

    def has_add_permission(self, request: object) -> bool:
        # A new agent needs a generated secret: create agents through the API.
        return False
