from __future__ import annotations

from django.apps import AppConfig


class TrinityConfig(AppConfig):
    name = "trinity"
    verbose_name = "Trinity platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from trinity.api import require_strings_for_string_fields

        require_strings_for_string_fields()
