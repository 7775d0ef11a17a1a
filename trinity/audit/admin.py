from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from trinity.audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin[AuditEntry]):
    """Read-only for everyone, superusers included: no add, change or delete."""

    list_display = [
        "created_at",
        "actor_kind",
        "actor_username",
        "source",
        "action",
        "object_type",
        "object_id",
    ]
    list_filter = ["actor_kind", "source", "object_type"]
    search_fields = ["actor_username", "action", "object_id", "object_label"]
    date_hierarchy = "created_at"
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
