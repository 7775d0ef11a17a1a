"""A new admin registers a plan from the panel without a terminal: "Sign in with Claude"
and "Sign in with ChatGPT" in Chromium against the simulator's sign-in pages, then a
turn served on the new plan; and ChatGPT's device code, typed on the simulator's
device page, polled by the panel to its plan.

Real processes: the live server, the simulator (its authorize page opens in a new
tab, the code is copied from it as a person would), headless Chromium, and for the
turns a real agent server running the real Claude Code CLI, or the Codex CLI.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.codex_credential import codex_credential_load
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.browser.conftest import Panel
from tests.execution.support import task

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password


def _sign_in_from_the_form(
    panel: Panel, *, name: str, provider: str, plan: str, button: str
) -> str:
    """Fill the Add form, press the provider's button, copy the code the provider's
    page shows in its new tab, paste it back and finish; returns what was copied."""
    page = panel.page
    page.get_by_role("button", name="Add subscription").click()
    form = page.get_by_role("form", name="Add a subscription")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Provider").select_option(provider)
    form.get_by_label("Plan").select_option(plan)
    with panel.context.expect_page() as opened:
        form.get_by_role("button", name=button).click()
    provider_page = opened.value
    provider_page.wait_for_load_state()
    assert provider_page.url.startswith(panel_simulator_url(panel))
    copied: str = provider_page.locator("#code").inner_text()
    provider_page.close()
    form.get_by_label("Code from the sign-in page").fill(copied)
    form.get_by_role("button", name="Finish sign-in").click()
    expect(page.locator(f"tr[data-subscription='{name}']")).to_be_visible()
    return copied


def panel_simulator_url(panel: Panel) -> str:
    from django.conf import settings

    authorize: str = settings.TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL
    return authorize.removesuffix("/oauth/authorize")


def _turn_on(client: APIClient, agent: str) -> dict[str, Any]:
    body = task(client, agent=agent, message="say hi")
    assert body["http_status"] == 200, body
    return body


def test_a_new_admin_signs_in_with_claude_and_a_turn_is_served_on_the_plan(
    panel: Panel, control: SimulatorControl, admin_user: User, admin_client_api: APIClient
) -> None:
    panel.sign_in("admin", PASSWORD)
    copied = _sign_in_from_the_form(
        panel,
        name="claude-signed",
        provider="anthropic",
        plan="max-5x",
        button="Sign in with Claude",
    )
    assert "#" in copied  # Claude's page shows code#state
    plan = Subscription.objects.get(name="claude-signed")
    assert plan.refresh_token is not None and plan.token_expires_at is not None
    # Nothing the page received carries a token of the plan.
    assert plan.token is not None and plan.token.reveal() not in panel.received_text()
    assert plan.refresh_token.reveal() not in panel.received_text()
    panel.screenshot("plan-signed-in-with-claude")

    agent = AgentFactory.create(name="bot", owner=admin_user)
    subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)
    control.clear_requests()
    body = _turn_on(admin_client_api, "bot")

    assert body["served_by_subscription"]["name"] == "claude-signed"
    sent = [r for r in control.requests() if r["path"] == "/v1/messages" and r["stream"]]
    assert [(r["credential"], r["status"]) for r in sent] == [("claude-sign-in-1", 200)]


def test_a_new_admin_signs_in_with_chatgpt_and_a_codex_turn_is_served_on_the_plan(
    panel: Panel, control: SimulatorControl, admin_user: User, admin_client_api: APIClient
) -> None:
    panel.sign_in("admin", PASSWORD)
    copied = _sign_in_from_the_form(
        panel, name="gpt-signed", provider="openai-codex", plan="pro", button="Sign in with ChatGPT"
    )
    assert copied.startswith("http://localhost:1455/auth/callback?")
    plan = Subscription.objects.get(name="gpt-signed")
    assert plan.provider == "openai-codex"

    agent = AgentFactory.create(
        name="coder", owner=admin_user, runtime="codex-cli", model="gpt-5.5-codex"
    )
    subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)
    control.clear_requests()
    body = _turn_on(admin_client_api, "coder")

    assert body["served_by_subscription"]["name"] == "gpt-signed"
    sent = [r for r in control.requests() if r["path"] == "/backend-api/codex/responses"]
    assert [(r["credential"], r["status"]) for r in sent] == [("chatgpt-sign-in-1", 200)]


def test_a_new_admin_signs_in_to_chatgpt_with_a_device_code_and_the_plan_appears(
    panel: Panel, control: SimulatorControl, admin_user: User
) -> None:
    panel.sign_in("admin", PASSWORD)
    page = panel.page
    page.get_by_role("button", name="Add subscription").click()
    form = page.get_by_role("form", name="Add a subscription")
    form.get_by_label("Name").fill("gpt-device")
    form.get_by_label("Provider").select_option("openai-codex")
    form.get_by_label("Plan").select_option("pro")
    form.get_by_role("button", name="Sign in with a device code").click()
    shown = form.get_by_label("Device code")
    expect(shown).to_have_text(re.compile(r"^[A-Z0-9]{4}-[A-Z0-9]{4}$"))
    user_code = shown.inner_text()
    panel.screenshot("plan-device-code-shown")

    # The person opens the device page from the panel's link and types the code there.
    with panel.context.expect_page() as opened:
        form.get_by_role("link", name="the ChatGPT device page").click()
    device_page = opened.value
    device_page.wait_for_load_state()
    assert device_page.url == panel_simulator_url(panel) + "/codex/device"
    device_page.get_by_label("Enter the code shown in the application").fill(user_code)
    device_page.get_by_role("button", name="Continue").click()
    expect(device_page.locator("#done")).to_contain_text("Signed in")
    device_page.close()

    # The panel's next poll (every 5 seconds, as the provider asked) finds it signed in.
    expect(page.locator("tr[data-subscription='gpt-device']")).to_be_visible(timeout=15_000)
    expect(shown).to_have_count(0)
    plan = Subscription.objects.get(name="gpt-device")
    assert plan.provider == "openai-codex" and plan.token is not None
    credential = codex_credential_load(plan.token.reveal())
    assert credential.refreshable
    assert credential.account_id == control.credential("chatgpt-sign-in-1")["account_id"]
    assert credential.access_token not in panel.received_text()
    assert control.oauth()["device_auths_approved"] == 1
