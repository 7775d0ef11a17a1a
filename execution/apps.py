from __future__ import annotations

from django.apps import AppConfig


class ExecutionConfig(AppConfig):
    name = "execution"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the turn tasks in every process: the services hand turns over by
        # task name (execution/handover.py), never by importing the task module.
        from execution import tasks  # noqa: F401
