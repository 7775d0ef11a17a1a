from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from execution.models import Execution, Status
from routing.headroom.reading import Reading, ReadingStatus, WindowReading
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, HeadroomSample, Subscription
from tests.agents.factories import AgentFactory, UserFactory
from tests.browser.conftest import LOADING_TEXT, Panel
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory
from trinity.selectors import system_settings_get

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password
PLAN_TOKEN = "sk-ant-oat01-" + "BrowserTestPlanToken" * 3 + "Zq9w"
API_KEY = "sk-ant-api03-" + "BrowserTestApiKey" * 3


def test_an_admin_signs_in_after_a_refused_password(panel: Panel, admin_user: User) -> None:
    page = panel.page
    panel.goto("/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Those credentials were not accepted")

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("signed-in-as")).to_have_text("Signed in as admin (admin)")
    expect(page.get_by_role("heading", level=1)).to_have_text("Subscriptions")
    expect(page.get_by_role("heading", name="No subscriptions yet")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to Trinity")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Sign in to Trinity")).to_be_visible()


def test_an_added_subscription_is_listed_with_its_fingerprint_and_never_its_token(
    panel: Panel, admin_user: User
) -> None:
    page = panel.page
    posts: list[str] = []
    page.on(
        "request",
        lambda r: (
            posts.append(r.url) if r.method == "POST" and "/api/subscriptions" in r.url else None
        ),
    )
    panel.sign_in("admin", PASSWORD)

    page.get_by_role("button", name="Add subscription").click()
    form = page.get_by_role("form", name="Add a subscription")
    form.get_by_label("Name").fill("team-max")
    form.get_by_label("Provider").select_option("anthropic")
    form.get_by_label("Plan").select_option("max-20x")
    # An API key pasted as a plan token is caught before anything is sent.
    form.get_by_label("Token", exact=True).fill(API_KEY)
    form.get_by_role("button", name="Add subscription").click()
    expect(form.get_by_role("alert")).to_contain_text("belongs in the platform API key setting")
    assert posts == []

    form.get_by_label("Token", exact=True).fill(PLAN_TOKEN)
    form.get_by_role("button", name="Add subscription").click()
    row = page.locator("tr[data-subscription='team-max']")
    expect(row.get_by_test_id("fingerprint")).to_have_text(f"token …{PLAN_TOKEN[-4:]}")
    expect(page.get_by_role("status").first).to_contain_text("Added team-max")
    assert len(posts) == 1

    stored = Subscription.objects.get(name="team-max")
    assert stored.token_fingerprint == PLAN_TOKEN[-4:]
    assert stored.token.reveal() == PLAN_TOKEN

    page.reload()
    expect(row.get_by_test_id("fingerprint")).to_have_text(f"token …{PLAN_TOKEN[-4:]}")
    assert PLAN_TOKEN not in page.content()
    assert page.locator("input[type=password]").count() == 0
    received = panel.received_text()
    assert "team-max" in received  # the listing itself was captured
    assert PLAN_TOKEN not in received
    assert PLAN_TOKEN[:-4] not in received


def test_the_auto_switch_toggle_persists_across_a_reload(panel: Panel, admin_user: User) -> None:
    page = panel.page
    panel.sign_in("admin", PASSWORD)
    panel.open("settings")
    switch = page.get_by_role("switch", name="Auto-switch subscriptions")
    expect(switch).to_be_checked()
    # Fallback is on by default and no key is set: the panel says it does nothing.
    expect(page.get_by_test_id("fallback-inert")).to_have_text("On but inert: no key configured")

    with page.expect_response(
        lambda r: r.url.endswith("/settings/auto-switch") and r.request.method == "PUT"
    ) as put:
        switch.click()
    assert put.value.status == 200
    page.reload()
    expect(page.get_by_role("switch", name="Auto-switch subscriptions")).not_to_be_checked()
    assert system_settings_get().auto_switch_subscriptions is False


def test_setting_the_platform_key_makes_the_fallback_live_and_never_shows_the_key(
    panel: Panel, admin_user: User
) -> None:
    page = panel.page
    panel.sign_in("admin", PASSWORD)
    panel.open("settings")
    page.get_by_label("Set the key").fill(API_KEY)
    page.get_by_role("button", name="Save key").click()
    expect(page.get_by_test_id("key-status")).to_contain_text(f"Configured ending …{API_KEY[-4:]}")
    expect(page.get_by_test_id("fallback-inert")).to_have_count(0)
    expect(page.get_by_label("Replace the key")).to_have_value("")
    assert API_KEY not in page.content()
    assert API_KEY not in panel.received_text()


def test_the_openai_key_is_set_beside_the_anthropic_key_and_never_shown(
    panel: Panel, admin_user: User
) -> None:
    openai_key = "sk-proj-" + "b" * 40 + "opnk"
    page = panel.page
    panel.sign_in("admin", PASSWORD)
    panel.open("settings")
    page.get_by_label("Set the OpenAI key").fill(openai_key)
    page.get_by_role("button", name="Save OpenAI key").click()
    expect(page.get_by_test_id("openai-key-status")).to_contain_text("Configured ending …opnk")
    # The Anthropic key is a key of its own: still unset, the fallback still inert.
    expect(page.get_by_test_id("key-status")).to_contain_text("Not configured")
    expect(page.get_by_label("Replace the OpenAI key")).to_have_value("")
    row = system_settings_get()
    assert row.openai_platform_api_key is not None and row.platform_api_key is None
    assert openai_key not in page.content()
    assert openai_key not in panel.received_text()


def test_an_admin_pauses_a_plan_and_every_page_load_shows_it_until_it_is_resumed(
    panel: Panel, admin_user: User
) -> None:
    plan = SubscriptionFactory.create(name="team-max")
    page = panel.page
    panel.sign_in("admin", PASSWORD)
    row = page.locator("tr[data-subscription='team-max']")
    expect(row.get_by_test_id("paused")).to_have_count(0)

    with page.expect_response(
        lambda r: r.url.endswith(f"/api/subscriptions/{plan.pk}") and r.request.method == "PATCH"
    ) as patch:
        row.get_by_role("button", name="Pause team-max").click()
    assert patch.value.status == 200
    expect(page.get_by_role("status").first).to_contain_text("Paused team-max: no turn")
    expect(row.get_by_test_id("paused")).to_have_text("Paused")
    expect(row.get_by_test_id("paused-by")).to_contain_text("paused by admin")
    assert Subscription.objects.get(pk=plan.pk).paused_at is not None

    page.reload()
    expect(row.get_by_test_id("paused")).to_have_text("Paused")
    row.get_by_role("button", name="Resume team-max").click()
    expect(row.get_by_test_id("paused")).to_have_count(0)
    expect(row.get_by_role("button", name="Pause team-max")).to_be_visible()
    assert Subscription.objects.get(pk=plan.pk).paused_at is None


def test_a_non_admin_sees_no_admin_controls(panel: Panel) -> None:
    operator = UserFactory.create(username="operator")
    AgentFactory.create(
        name="builder", owner=operator, subscription=SubscriptionFactory.create(name="shared-max")
    )
    page = panel.page
    panel.sign_in("operator", PASSWORD)
    expect(page.get_by_test_id("signed-in-as")).to_have_text("Signed in as operator")

    expect(page.locator("tr[data-subscription='shared-max']")).to_be_visible()
    for name in ("Add subscription", "Rotate token", "Delete", "Pause shared-max"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)

    panel.open("settings")
    expect(page.get_by_text("Only an admin can change these.")).to_be_visible()
    expect(page.get_by_test_id("threshold-readonly")).to_have_text("Alerts at 75%.")
    expect(page.get_by_role("switch")).to_have_count(0)
    expect(page.locator("input, select")).to_have_count(0)
    expect(page.get_by_test_id("platform-key-section")).to_have_count(0)
    assert not [r for r in panel.responses if "platform-api-key" in r.url]


def _seed_fleet(owner: User) -> None:
    """Three plans (one measured, one limited, one never read), agents, turns, history."""
    now = timezone.now()
    max20 = SubscriptionFactory.create(name="max-20x-main", plan_type="max-20x")
    pro = SubscriptionFactory.create(name="pro-backup", plan_type="pro")
    SubscriptionFactory.create(name="codex-plus", provider="openai-codex", plan_type="plus")
    researcher = AgentFactory.create(name="researcher", owner=owner, subscription=max20)
    AgentFactory.create(name="reviewer", owner=owner, subscription=max20)
    AgentFactory.create(name="nightly-report", owner=owner, subscription=pro)
    AgentFactory.create(name="sandbox", owner=owner, subscription=None)
    RateLimitEventFactory.create(subscription=pro, occurred_at=now - timedelta(minutes=20))
    RateLimitEventFactory.create(
        subscription=pro, failure_kind=FailureKind.AUTH, occurred_at=now - timedelta(hours=3)
    )

    def window(pct: float, resets_in: timedelta, status: str = "allowed") -> WindowReading:
        return WindowReading(utilization=pct, resets_at=now + resets_in, status=status)

    snapshots_write(
        {
            max20.pk: Reading(
                fetched_at=now - timedelta(minutes=2),
                status=ReadingStatus.OK,
                source="probe",
                windows={
                    "five_hour": window(62.5, timedelta(hours=2, minutes=13)),
                    "seven_day": window(41.0, timedelta(days=3, hours=4)),
                },
            ),
            pro.pk: Reading(
                fetched_at=now - timedelta(minutes=1),
                status=ReadingStatus.RATE_LIMITED,
                source="probe",
                reset_at=now + timedelta(minutes=47),
                windows={
                    "five_hour": window(100.0, timedelta(minutes=47), "rejected"),
                    "seven_day": window(88.0, timedelta(days=1, hours=2), "allowed_warning"),
                },
            ),
        }
    )
    HeadroomSample.objects.bulk_create(
        HeadroomSample(
            subscription=max20,
            fetched_at=now - timedelta(minutes=30 * i + 2),
            status="ok",
            five_hour=max(0.0, 62.5 - 4.5 * (i % 12)),
            seven_day=max(0.0, 41.0 - 0.4 * i),
        )
        for i in range(48)
    )
    Execution.objects.create(
        agent=researcher,
        agent_name="researcher",
        message="summarise the open issues",
        status=Status.SUCCEEDED,
        served_by_kind="subscription",
        served_by_subscription=max20,
        attempts=[
            {
                # The shape execution/services.py records for each attempt.
                "credential_kind": "subscription",
                "subscription_id": max20.pk,
                "name": max20.name,
                "fingerprint": max20.token_fingerprint,
                "why": "assigned",
                "outcome": "served",
                "error_code": None,
                "status_code": 200,
                "override_echo": None,
                "legacy": False,
                "resets_at": None,
                "at": (now - timedelta(minutes=4)).isoformat(),
            }
        ],
        input_tokens=1840,
        output_tokens=312,
        created_at=now - timedelta(minutes=5),
        finished_at=now - timedelta(minutes=4),
    )
    Execution.objects.create(
        agent_name="nightly-report",
        message="nightly report",
        status=Status.FAILED,
        error_code="rate_limit",
        error_detail="The plan's 5-hour limit is reached; it resets in 47 min.",
        attempts=[
            {
                "credential_kind": "subscription",
                "subscription_id": pro.pk,
                "name": pro.name,
                "fingerprint": pro.token_fingerprint,
                "why": "assigned",
                "outcome": "refused",
                "error_code": "rate_limit",
                "status_code": 429,
                "override_echo": None,
                "legacy": False,
                "resets_at": (now + timedelta(minutes=47)).isoformat(),
                "at": (now - timedelta(minutes=20)).isoformat(),
            }
        ],
        created_at=now - timedelta(minutes=20),
        finished_at=now - timedelta(minutes=20),
    )


def _expect_content(page: Any, page_id: str) -> None:
    """Wait until `page_id` shows the seeded fleet (_seed_fleet), not a placeholder."""
    if page_id == "subscriptions":
        expect(page.locator("tr[data-subscription]")).to_have_count(3)
        details = page.get_by_role("button", name="Details of max-20x-main")
        if details.get_attribute("aria-expanded") == "false":
            details.click()
        expect(page.get_by_role("heading", name="Agents on max-20x-main")).to_be_visible()
        measured = page.locator("tr[data-subscription='max-20x-main']")
        expect(measured.get_by_role("meter")).to_have_count(2)
        expect(measured).to_contain_text("62.5% used · resets in 2 h 1")
        limited = page.locator("tr[data-subscription='pro-backup']")
        expect(limited.get_by_test_id("rate-limited-chip")).to_be_visible()
        expect(limited.get_by_test_id("failure-events")).to_have_text(
            "2 failure events (24h): 1 rate limit, 1 credential refused"
        )
        expect(page.locator("canvas")).to_be_visible()
    elif page_id == "settings":
        switch = page.get_by_role("switch", name="Auto-switch subscriptions")
        expect(switch).to_be_enabled()  # disabled until its value arrived
        expect(switch).to_be_checked()
        expect(page.get_by_label("Alert threshold (%)")).to_have_value("75")
        expect(page.get_by_test_id("key-status")).to_contain_text("Not configured")
        expect(page.get_by_text("Unknown", exact=True)).to_have_count(0)
    elif page_id == "agents":
        expect(page.locator("tr[data-agent]")).to_have_count(4)
        expect(page.locator("tr[data-agent='researcher']")).to_contain_text("max-20x-main")
        expect(page.locator("tr[data-agent='nightly-report']")).to_contain_text("pro-backup")
        # The week plan's column: no plan stored here, so no agent has a current entry.
        expect(page.get_by_role("columnheader", name="Planned")).to_be_visible()
        expect(page.get_by_test_id("planned").first).to_contain_text("No current plan")
    elif page_id == "activity":
        expect(page.locator("tr[data-execution]")).to_have_count(2)
        expect(page.locator("tr[data-execution]").first).to_contain_text("researcher")
        expect(
            page.get_by_test_id("no-notifications").or_(
                page.get_by_role("list", name="Notifications")
            )
        ).to_be_visible()
    else:
        raise AssertionError(f"no content check for {page_id}")
    # Nothing else is still on its way (a usage cell, the history chart).
    expect(page.get_by_text(LOADING_TEXT)).to_have_count(0)


def test_every_page_is_screenshotted_at_desktop_and_phone_widths(
    panel: Panel, admin_user: User
) -> None:
    _seed_fleet(admin_user)
    page = panel.page
    # A slow server: a screenshot that does not wait for its page's data shows
    # "Loading…" instead, and Panel.screenshot refuses it.
    panel.slow_network(latency_ms=400)
    panel.goto("/")
    expect(page.get_by_role("heading", name="Sign in to Trinity")).to_be_visible()
    for size in ("desktop", "phone"):
        panel.resize(size)
        panel.screenshot("login")
    panel.resize("desktop")
    panel.sign_in("admin", PASSWORD)
    for size in ("desktop", "phone"):
        panel.resize(size)
        for page_id in ("subscriptions", "settings", "agents", "activity"):
            panel.open(page_id)
            _expect_content(page, page_id)
            path = panel.screenshot(page_id)
            assert path.stat().st_size > 5_000
    # At phone width nothing is wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
