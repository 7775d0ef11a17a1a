from __future__ import annotations

from django.contrib import admin

from execution.models import Execution


@admin.register(Execution)
class ExecutionAdmin(admin.ModelAdmin[Execution]):
    list_display = ["created_at", "agent_name", "trigger", "status", "error_code", "served_by_kind"]
    list_filter = ["status", "error_code", "trigger"]
    search_fields = ["agent_name"]
    readonly_fields = [f.name for f in Execution._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False
