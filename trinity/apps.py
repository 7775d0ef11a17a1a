from __future__ import annotations

from django.apps import AppConfig


class TrinityConfig(AppConfig):
    name = "trinity"
    verbose_name = "Trinity platform"
    default_auto_field = "django.db.models.BigAutoField"
