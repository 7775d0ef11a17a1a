from __future__ import annotations

from django.apps import AppConfig


class TrinityConfig(AppConfig):
    name = "trinity"
    verbose_name = "Trinity platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from trinity.api import strict_input_fields

        strict_input_fields()
