"""Finished turns' events past their retention are dropped; the turns stay
(``execution/live/retention.py``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from execution import services
from execution.models import Execution, ExecutionEvent, Status
from tests.agents.factories import AgentFactory
from trinity import clock

pytestmark = pytest.mark.django_db


def test_finished_turns_events_past_their_retention_are_dropped(owner: User, settings: Any) -> None:
    from execution.live.retention import turn_events_prune

    settings.TRINITY_TURN_EVENTS_RETENTION_DAYS = 30
    agent = AgentFactory.create(name="bot", owner=owner)
    now = clock.now()
    old, recent = (
        services.execution_create(agent=agent, message=m, trigger="api") for m in ("old", "new")
    )
    for execution, days in ((old, 31), (recent, 29)):
        Execution.objects.filter(pk=execution.pk).update(
            status=Status.SUCCEEDED, finished_at=now - timedelta(days=days)
        )
        ExecutionEvent.objects.create(execution=execution, seq=1, kind="turn", data={}, at=now)

    assert turn_events_prune(now=now) == 1
    assert list(ExecutionEvent.objects.values_list("execution_id", flat=True)) == [recent.pk]
    assert Execution.objects.count() == 2
