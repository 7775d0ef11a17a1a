from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from trinity.models import Notification, SystemSettings


@admin.register(SystemSettings)
class SystemSettingsAdmin(admin.ModelAdmin[SystemSettings]):
    # The platform key is write-only: set it through the API or the panel.
    fields = [
        "auto_switch_subscriptions",
        "subscription_api_key_fallback",
        "subscription_headroom_auto_refresh",
        "headroom_alert_threshold",
        "platform_api_key_fingerprint",
        "updated_at",
    ]
    readonly_fields = ["platform_api_key_fingerprint", "updated_at"]
    list_display = ["__str__", "auto_switch_subscriptions", "subscription_api_key_fallback"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not SystemSettings.objects.exists()

    def has_delete_permission(
        self, request: HttpRequest, obj: SystemSettings | None = None
    ) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin[Notification]):
    list_display = ["created_at", "level", "kind", "title", "agent_name"]
    list_filter = ["level", "kind"]
    search_fields = ["title", "agent_name"]
    readonly_fields = [f.name for f in Notification._meta.fields]
