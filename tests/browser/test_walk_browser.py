"""A turn that really switches, seen in the panel.

The turn runs through the REST API on a real agent server running the real Claude
Code CLI against the simulator: subscription A's 5-hour window is used up, B has
room. A refuses, the same turn walks to B and is served there, B is committed.
Headless Debian Chromium then shows the trail on Activity and the switch on Agents,
each with the names and the reason sentence the API sent (`from_name`, `to_name`,
`explanation`): the panel words nothing of its own and looks nothing up elsewhere.
The screenshots (taken once the content is asserted) land in
test-artifacts/screenshots/walk-{activity,agents}-1280.png; docs/flows/img holds
copies, looked at before they were committed.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from rest_framework.test import APIClient

from agents.models import Agent
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.browser.conftest import Panel
from tests.subscriptions.factories import plan_token
from trinity.models import Notification, NotificationRead

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password


def _switched_turn(control: SimulatorControl, owner: User) -> tuple[dict[str, Any], str, str]:
    """Run a turn whose subscription is exhausted; answer its body and both tokens."""
    exhausted, healthy = plan_token(), plan_token()
    control.register(exhausted, kind="oauth", label="plan-a")
    control.register(healthy, kind="oauth", label="plan-b")
    plan_a, _ = subscription_services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=exhausted
    )
    subscription_services.subscription_register(
        name="plan-b", provider="anthropic", plan_type="max-20x", token=healthy
    )
    agent = AgentFactory.create(name="researcher", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=plan_a.pk)
    control.set_usage(exhausted, "five_hour", percent=100)

    client = APIClient()
    client.force_login(owner)
    response = client.post("/api/agents/researcher/task", {"message": "say hi"}, format="json")
    assert response.status_code == 200, response.content
    return response.json(), exhausted, healthy


def test_a_switched_turn_shows_its_trail_on_activity_and_its_switch_on_agents(
    panel: Panel, control: SimulatorControl, owner: User
) -> None:
    body, exhausted, healthy = _switched_turn(control, owner)

    # The switch happened for real: the simulator saw A refused, then B served the
    # same turn, and B is now the agent's subscription.
    sent = [r["credential"] for r in control.requests() if r["path"].startswith("/v1/messages")]
    assert sent[0] == "plan-a" and sent[-1] == "plan-b", sent
    assert body["served_by_subscription"]["name"] == "plan-b"
    assert [(a["name"], a["outcome"]) for a in body["attempts"]] == [
        ("plan-a", "refused"),
        ("plan-b", "served"),
    ]
    turn_switch = body["subscription_switch"]
    assert turn_switch["committed"] is True
    assert turn_switch["from_name"] == "plan-a"
    assert "plan-a refused" in turn_switch["explanation"]
    agent = Agent.objects.select_related("subscription").get(name="researcher")
    assert agent.subscription is not None and agent.subscription.name == "plan-b"

    # What the Agents page reads: the agent's row as the API answers it to the owner.
    client = APIClient()
    client.force_login(owner)
    (row,) = [a for a in client.get("/api/agents").json() if a["name"] == "researcher"]
    last_switch = row["last_switch"]
    assert last_switch["from_name"] == "plan-a" and last_switch["to_name"] == "plan-b"
    assert "plan-a refused" in last_switch["explanation"]

    page = panel.page
    panel.sign_in("owner", PASSWORD)

    panel.open("activity")
    row = page.locator(f"tr[data-execution='{body['id']}']")
    steps = row.get_by_role("list", name="Attempts, in order").get_by_role("listitem")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_have_attribute("data-outcome", "refused")
    expect(steps.nth(0)).to_contain_text("plan-a")
    expect(steps.nth(0)).to_contain_text("its assigned subscription")
    expect(steps.nth(0)).to_contain_text("rate_limit, HTTP 429")
    expect(steps.nth(1)).to_have_attribute("data-outcome", "served")
    expect(steps.nth(1)).to_contain_text("plan-b")
    expect(steps.nth(1)).to_contain_text("next best by headroom")
    expect(row.get_by_test_id("switch")).to_have_text(
        "Switched plan-a → plan-b. The agent now runs on plan-b."
    )
    expect(row.get_by_test_id("switch-reason")).to_have_text(turn_switch["explanation"])
    expect(row).to_contain_text("Subscription plan-b")
    switched_note = page.locator("li[data-kind='subscription_switched']")
    expect(switched_note).to_contain_text("Subscription auto-switched to 'plan-b'")
    expect(switched_note).to_have_attribute("data-unread", "true")
    expect(page.get_by_test_id("unread-count")).to_have_text("1 unread")
    panel.screenshot("walk-activity")

    # Marked read on the server, and the marker goes.
    page.get_by_role("button", name="Mark all read").click()
    expect(switched_note).to_have_attribute("data-unread", "false")
    expect(page.get_by_test_id("unread-count")).to_have_count(0)
    # Read for the owner who marked them, and for nobody else (read state is per user).
    notices = Notification.objects.filter(agent__owner=owner)
    assert notices.exists()
    assert not notices.exclude(reads__user=owner).exists()
    assert not NotificationRead.objects.exclude(user=owner).exists()

    before_agents = len(panel.responses)
    panel.open("agents")
    cell = page.locator("tr[data-agent='researcher']").get_by_test_id("last-switch")
    expect(cell.locator("strong")).to_have_text("plan-a → plan-b")
    expect(cell.get_by_test_id("switch-reason")).to_have_text(last_switch["explanation"])
    expect(cell.locator("time")).to_have_attribute("datetime", last_switch["at"])
    expect(page.locator("tr[data-agent='researcher']")).to_contain_text("Subscription plan-b")
    # last_switch names its origin itself: the page reads no turn history for it.
    asked = [r.url for r in panel.responses[before_agents:]]
    assert not [u for u in asked if "/api/executions" in u], asked
    panel.screenshot("walk-agents")

    received = panel.received_text()
    assert exhausted not in received and healthy not in received
