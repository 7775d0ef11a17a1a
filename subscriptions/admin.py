from __future__ import annotations

from django.contrib import admin

from subscriptions.models import RateLimitEvent, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin[Subscription]):
    # Tokens are never shown; replacing one goes through the API (POST upsert).
    list_display = [
        "name",
        "provider",
        "plan_type",
        "token_fingerprint",
        "billing_class",
        "updated_at",
    ]
    list_filter = ["provider", "plan_type"]
    search_fields = ["name"]
    fields = [
        "name",
        "provider",
        "plan_type",
        "max_concurrency",
        "token_fingerprint",
        "billing_class",
        "overage",
        "created_at",
        "updated_at",
    ]
    readonly_fields = [
        "provider",
        "token_fingerprint",
        "billing_class",
        "overage",
        "created_at",
        "updated_at",
    ]

    def has_add_permission(self, request: object) -> bool:
        return False


@admin.register(RateLimitEvent)
class RateLimitEventAdmin(admin.ModelAdmin[RateLimitEvent]):
    list_display = ["occurred_at", "agent_name", "subscription", "failure_kind"]
    list_filter = ["failure_kind"]
    search_fields = ["agent_name", "subscription__name"]
    readonly_fields = ["agent_name", "subscription", "error_message", "failure_kind", "occurred_at"]
