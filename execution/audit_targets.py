"""The turns' and schedules' write routes, for the audit log
(``trinity/audit/registry.py``). Starting a turn (task, chat) is not among them: the
turn's Execution row is its record."""

from __future__ import annotations

from typing import Any

from execution.models import Execution, Schedule
from trinity.audit.registry import Target, register


def _execution(kwargs: Any) -> Any:
    return Execution.objects.filter(pk=kwargs["pk"])


def _schedule(kwargs: Any) -> Any:
    return Schedule.objects.filter(agent__name=kwargs["name"], name=kwargs["schedule"]).order_by(
        "pk"
    )


def _created(data: Any) -> Schedule | None:
    if not isinstance(data, dict) or "id" not in data:
        return None
    return Schedule.objects.filter(pk=data["id"]).first()


register("execution-cancel", Target("execution", verb="cancel", candidates=_execution))
register("agent-schedule-list", Target("schedule", created=_created))
register("agent-schedule-detail", Target("schedule", candidates=_schedule))
register("notification-mark-read", Target("notifications", action="notifications.mark_read"))
