"""The agents' write routes, for the audit log (``trinity/audit/registry.py``)."""

from __future__ import annotations

from typing import Any

from agents.models import Agent
from trinity.audit.registry import Target, register


def _named(kwargs: Any) -> Any:
    # Every owner's agent of that name: the view decides whose (the audit keeps the one
    # it changed).
    return Agent.objects.filter(name=kwargs["name"]).order_by("pk")


def _created(data: Any) -> Agent | None:
    if not isinstance(data, dict) or "name" not in data:
        return None
    return Agent.objects.filter(name=data["name"], owner__username=data.get("owner")).first()


register("agent-list", Target("agent", created=_created))
register("agent-detail", Target("agent", candidates=_named))
register("agent-start", Target("agent", verb="start", candidates=_named))
register("agent-stop", Target("agent", verb="stop", candidates=_named))
