"""Placement end to end: the REST API, real agent servers running the real Claude Code
CLI and the provider simulator. Nothing refuses, but another plan's weekly window
resets days sooner than the assignment's: the turn starts there, the move is committed
once with one notice that says why, and the next turn stays (the dwell) even though
the first plan would still be placed on. A plan under its 5-hour reserve takes no
agent."""

from __future__ import annotations

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions.headroom.sampler import headroom_refresh
from subscriptions.models import Subscription
from tests.execution.support import agent_on, messages_sent, register_plan, task
from trinity import clock
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DAY = 86400


def late_and_soon(
    control: SimulatorControl, owner: User, *, soon_five_hour: float | None = None
) -> tuple[Subscription, Subscription]:
    """An agent on plan-late (30 % of a week that resets in 6 days) beside plan-soon (40 %
    of one that resets tomorrow), both read by the sampler's real probe."""
    late, late_token = register_plan(control, "plan-late")
    soon, soon_token = register_plan(control, "plan-soon")
    agent_on(owner, late)
    control.set_usage(late_token, "seven_day", percent=30, resets_in=6 * DAY)
    control.set_usage(soon_token, "seven_day", percent=40, resets_in=1 * DAY)
    if soon_five_hour is not None:
        control.set_usage(soon_token, "five_hour", percent=soon_five_hour, resets_in=3600)
    for plan in (late, soon):
        headroom_refresh(subscription=plan, now=clock.now())
    control.clear_requests()
    return late, soon


def test_a_turn_moves_to_the_plan_whose_weekly_headroom_expires_soonest(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    late, soon = late_and_soon(control, owner)

    with time_machine.travel(clock.now(), tick=True):
        # The explainer says what the turn will do, by the same planner.
        before = owner_client.get("/api/agents/bot/routing").json()
        assert before["pre_dispatch"] == "placement", before
        assert (before["first"]["name"], before["first"]["why"]) == ("plan-soon", "placement")

        placed = task(owner_client)
        assert placed["http_status"] == 200, placed
        assert [(x["name"], x["why"]) for x in placed["attempts"]] == [("plan-soon", "placement")]
        assert messages_sent(control) == [("plan-soon", 200)]  # plan-late was never asked
        agent = Agent.objects.get(name="bot")
        assert agent.subscription_id == soon.pk
        assert agent.last_switch["why"]["why"] == "placement"
        switched = Notification.objects.filter(kind="subscription_switched")
        assert switched.count() == 1
        assert "weekly headroom" in switched.get().body

        # The explainer shows what the next turn would do: stay (the agent just moved).
        routing = owner_client.get("/api/agents/bot/routing").json()
        assert (routing["first"]["name"], routing["pre_dispatch"]) == ("plan-soon", "serving")

        again = task(owner_client)
        assert [(x["name"], x["why"]) for x in again["attempts"]] == [("plan-soon", "assigned")]
        assert Notification.objects.filter(kind="subscription_switched").count() == 1


def test_a_plan_under_its_5_hour_reserve_takes_no_agent(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    # 10 % of its 5-hour window left for the next hour: under the reserve, and no
    # better on balance than the assignment.
    late, _ = late_and_soon(control, owner, soon_five_hour=90)

    with time_machine.travel(clock.now(), tick=True):
        placed = task(owner_client)

    assert [(x["name"], x["why"]) for x in placed["attempts"]] == [("plan-late", "assigned")]
    assert Agent.objects.get(name="bot").subscription_id == late.pk
