from __future__ import annotations

from django.apps import AppConfig


class ExecutionConfig(AppConfig):
    name = "execution"
    default_auto_field = "django.db.models.BigAutoField"
