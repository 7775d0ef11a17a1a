"""The Subscriptions page shows every plan's usage without anyone pressing anything.

As `make run` leaves it: the demo's two plans on the simulator, demo-max at 12 % of its
5-hour window and demo-pro at 97 %. One is registered before the page opens (as
seed_demo does), the other through the page's own form; neither has been swept. Real
processes: the live server, the simulator's usage endpoint, headless Chromium. The
page is read as a user reads it: the 5h meter of each row, and no "No reading yet".
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.browser.conftest import Panel
from tests.subscriptions.factories import plan_token

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password


def _known(control: SimulatorControl, name: str, percent: float) -> str:
    token = plan_token()
    control.register(token, kind="oauth", label=name)
    control.set_usage(token, "five_hour", percent=percent)
    return token


def test_every_plan_shows_its_windows_on_first_look(
    panel: Panel, control: SimulatorControl, admin_user: User
) -> None:
    subscription_services.subscription_register(
        name="demo-max",
        provider="anthropic",
        plan_type="max-20x",
        token=_known(control, "demo-max", 12),
    )
    pro_token = _known(control, "demo-pro", 97)
    page = panel.page
    panel.sign_in("admin", PASSWORD)
    expect(page.get_by_role("heading", level=1)).to_have_text("Subscriptions")

    max_row = page.locator("tr[data-subscription='demo-max']")
    expect(max_row.get_by_role("meter", name="5h window used")).to_have_attribute(
        "aria-valuenow", "12"
    )
    expect(max_row).to_contain_text("12% used")

    page.get_by_role("button", name="Add subscription").click()
    form = page.get_by_role("form", name="Add a subscription")
    form.get_by_label("Name").fill("demo-pro")
    form.get_by_label("Provider").select_option("anthropic")
    form.get_by_label("Plan").select_option("pro")
    form.get_by_label("Token", exact=True).fill(pro_token)
    form.get_by_role("button", name="Add subscription").click()

    pro_row = page.locator("tr[data-subscription='demo-pro']")
    expect(pro_row.get_by_role("meter", name="5h window used")).to_have_attribute(
        "aria-valuenow", "97"
    )
    expect(pro_row).to_contain_text("97% used")
    expect(page.get_by_test_id("no-live-figures")).to_have_count(0)
    assert "Never probed" not in page.locator("table").inner_text()
    panel.screenshot("first-look-subscriptions")
