"""The gateway's rows in Django's admin: to read, not to write.

Keys change through the API's services (``gateway/keys.py``), which validate and move
``updated_at`` (the gateway polls it): an edit here would do neither. The one write
offered is revoking, through the same service. A key's digest is never shown: it is
not the key, but nothing an admin does needs it. Sessions and usage are the gateway's
record and are read-only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from gateway.keys import LIMIT_FIELDS, gateway_key_revoke
from gateway.models import GatewayKey, GatewaySession, GatewayUsage
from trinity import clock


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(GatewayKey)
class GatewayKeyAdmin(ReadOnlyAdmin):
    list_display = ["name", "owner", "prefix", "created_at", "expires_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "owner__username"]
    # Every field but ``digest``.
    fields = readonly_fields = (
        "name",
        "owner",
        "prefix",
        "created_by",
        "created_at",
        "updated_at",
        "expires_at",
        "revoked_at",
        "providers",
        "model_families",
        *LIMIT_FIELDS,
    )
    actions = ["revoke"]

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[GatewayKey]) -> None:
        now = clock.now()
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            gateway_key_revoke(key=key, now=now)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(GatewaySession)
class GatewaySessionAdmin(ReadOnlyAdmin):
    list_display = ["session_id", "key", "provider", "subscription", "on_key", "updated_at"]
    list_filter = ["provider", "on_key"]
    search_fields = ["session_id", "key__name"]


@admin.register(GatewayUsage)
class GatewayUsageAdmin(ReadOnlyAdmin):
    list_display = [
        "at",
        "key",
        "owner",
        "path",
        "model",
        "status",
        "served_by_kind",
        "served_by_name",
        "input_tokens",
        "output_tokens",
        "list_usd",
        "billed_usd",
    ]
    list_filter = ["provider", "status", "served_by_kind"]
    search_fields = ["key__name", "owner__username", "model"]
    date_hierarchy = "at"
    list_select_related = ["key", "owner"]
