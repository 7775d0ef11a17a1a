from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "trinity.audit"
    label = "audit"
    verbose_name = "Audit log"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from trinity.audit import signals

        signals.connect()
        # Each app's ``audit_targets`` module registers the routes it owns; found by
        # name, so this package imports none of them.
        autodiscover_modules("audit_targets")
