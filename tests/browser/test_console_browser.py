"""The agent console, as a new operator uses it: headless Debian Chromium on the live
server creates an agent on the Agents page, opens its console, sends a message and
watches the reply arrive while the turn still runs, then cancels a second turn in a
long tool call. The agent is a real agent server running the real Claude Code CLI
against the simulator (a slow model: a pause between the answer's events).

Screenshots land in test-artifacts/screenshots/console-{streaming,cancelled}-1280.png;
docs/flows/img holds copies, looked at before they were committed.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from execution.models import Execution, Status
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.browser.conftest import Panel
from tests.execution.support import register_plan

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password
# A turn's steps in the browser: an agent's start and a CLI's first answer take seconds.
TURN_MS = 90_000


def _create_agent(panel: Panel) -> None:
    page = panel.page
    panel.open("agents")
    page.get_by_test_id("new-agent").click()
    form = page.get_by_test_id("agent-form")
    form.get_by_label("Name").fill("bot")
    form.get_by_label("Subscription").select_option(label="plan-a")
    form.get_by_label("Bash").check()
    form.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_test_id("agents-message")).to_contain_text("Created bot.")


def _send(panel: Panel, message: str) -> None:
    page = panel.page
    page.get_by_label("Mode").select_option("task")
    page.get_by_label("Message").fill(message)
    page.get_by_role("button", name="Send").click()


def test_a_new_operator_creates_an_agent_and_watches_its_reply_stream_in(
    panel: Panel, control: SimulatorControl, owner: User
) -> None:
    register_plan(control, "plan-a")
    control.set_stream_pause(250)  # the answer's words come over seconds
    panel.sign_in(owner.username, PASSWORD)
    _create_agent(panel)
    page = panel.page
    page.locator("tr[data-agent=bot]").get_by_role("link", name="Console").click()

    _send(panel, "say hi")
    status = page.get_by_test_id("live-status")
    text = page.get_by_test_id("live-text")
    expect(text).not_to_be_empty(timeout=TURN_MS)
    # The first words are on the page while the turn still runs.
    assert status.get_attribute("data-status") == "running"
    assert Execution.objects.get().status == Status.RUNNING
    panel.screenshot("console-streaming")
    expect(status).to_have_attribute("data-status", "succeeded", timeout=TURN_MS)
    expect(page.get_by_test_id("live-timeline")).to_contain_text("plan-a")

    control.set_stream_pause(0)
    # The CLI's Bash refuses a bare long sleep; a command that sleeps inside runs.
    control.arm_red_team(
        trigger="LONG-TOOL", reads=[], commands=["echo waiting; sleep 300; echo done"]
    )
    _send(panel, "LONG-TOOL: wait for it")
    timeline = page.get_by_test_id("live-timeline")
    expect(timeline.locator("[data-kind=tool]")).to_contain_text("sleep 300", timeout=TURN_MS)
    page.get_by_test_id("cancel-turn").click()
    expect(status).to_have_attribute("data-status", "cancelled", timeout=10_000)
    panel.screenshot("console-cancelled")

    second = Execution.objects.order_by("-created_at").first()
    assert second is not None and second.status == Status.CANCELLED
    assert not RateLimitEvent.objects.exists()
