from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the agent tasks in every process: the lifecycle enqueues them by
        # name (``lifecycle.APPLY_CREDENTIALS``), never by importing the task module.
        from agents import tasks  # noqa: F401
        from agents.metrics import AgentServersCollector
        from trinity.metrics import state_collector_register

        state_collector_register(AgentServersCollector())
