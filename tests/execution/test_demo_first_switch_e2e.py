"""The demo's first switch is decided by headroom: its plans are read when they are
registered, so the walk never has to fall back to load order.

The demo as seed_demo leaves it (demo-max at 12 % of its 5-hour window, demo-pro at
97 %, the agent on demo-pro), registered through the service, then turns through the
REST API on a real agent server running the real Claude Code CLI against the
simulator until one is served elsewhere.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.execution.support import task
from tests.subscriptions.factories import plan_token

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_demos_first_switch_names_headroom_not_load_order(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    tokens = {}
    for name, plan_type, percent in (("demo-max", "max-20x", 12), ("demo-pro", "pro", 97)):
        tokens[name] = plan_token()
        control.register(tokens[name], kind="oauth", label=name)
        control.set_usage(tokens[name], "five_hour", percent=percent)
        subscription_services.subscription_register(
            name=name, provider="anthropic", plan_type=plan_type, token=tokens[name]
        )
    pro = Subscription.objects.get(name="demo-pro")
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=pro.pk)

    switched = None
    for _ in range(20):
        body = task(owner_client)
        assert body["status"] == "succeeded", body
        if body["subscription_switch"]:
            switched = body
            break
        control.set_usage(tokens["demo-pro"], "five_hour", percent=100)
    assert switched is not None
    assert switched["served_by_subscription"]["name"] == "demo-max"
    explanation = switched["subscription_switch"]["explanation"]
    assert "load order" not in explanation, explanation
    assert "headroom" in explanation, explanation
