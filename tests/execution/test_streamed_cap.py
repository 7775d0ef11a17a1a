"""A web process runs at most TRINITY_WEB_STREAMED_TURNS streamed turns: each holds a
thread and a pooled database connection for its turn (``execution/live/api.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from execution.live.api import streamed_turns
from execution.models import Execution
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db


def test_a_streamed_turn_over_the_processs_cap_is_refused_and_leaves_no_row(
    owner: User, owner_client: APIClient, settings: Any
) -> None:
    AgentFactory.create(name="bot", owner=owner)
    settings.TRINITY_WEB_STREAMED_TURNS = 2
    streamed_turns.running = 2  # two streamed turns run in this process
    try:
        refused = owner_client.post(
            "/api/agents/bot/task", {"message": "hi", "stream": True}, format="json"
        )
    finally:
        streamed_turns.running = 0

    assert refused.status_code == 429 and refused["Retry-After"] == "5"
    assert refused.json()["code"] == "too_many_turns"
    assert "cap of 2 streamed turns" in refused.json()["detail"]
    assert not Execution.objects.exists()
