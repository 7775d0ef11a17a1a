"""A weekly block outlives a 5-hour rollover, end to end: the REST API, real agent
servers running the real Claude Code CLI and the provider simulator. A plan whose
weekly window is rejected with a reset days away, beside an allowed 5-hour window, is
routed around before and after its 5-hour window resets: the stored reading goes stale
per window, and the weekly rejection stands until its own reset."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from tests.execution.support import agent_on, messages_sent, register_plan, task
from trinity import clock

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_weekly_block_is_routed_around_before_and_after_a_5h_rollover(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, a, name="first")
    agent_on(owner, a, name="second")
    control.set_usage(a_token, "seven_day", percent=100, resets_in=3 * 86400)
    control.set_usage(a_token, "five_hour", percent=28, resets_in=600)

    with time_machine.travel(clock.now(), tick=True) as traveller:
        probed = owner_client.post(f"/api/subscriptions/{a.pk}/usage/refresh")
        assert probed.status_code == 200, probed.content
        control.clear_requests()

        before = task(owner_client, agent="first")
        assert before["http_status"] == 200, before
        assert [(x["name"], x["why"]) for x in before["attempts"]] == [("plan-b", "pre_dispatch")]

        # The 5-hour window rolls over; the reading (20 minutes old, still fresh) keeps
        # its weekly rejection.
        traveller.shift(timedelta(minutes=20))
        control.advance_clock(20 * 60)
        control.clear_requests()
        # The routing explainer agrees: plan-a still refuses, by its reading.
        assigned = owner_client.get("/api/agents/second/routing").json()["assigned"]
        assert (assigned["name"], assigned["refusing"]) == ("plan-a", True), assigned
        assert assigned["decided_by"] == "reading", assigned
        after = task(owner_client, agent="second")
        assert after["http_status"] == 200, after
        assert [(x["name"], x["why"]) for x in after["attempts"]] == [("plan-b", "pre_dispatch")]
        assert messages_sent(control) == [("plan-b", 200)]  # plan-a was never asked
