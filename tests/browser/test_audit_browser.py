"""The Audit page in a real browser: a failed sign-in, the sign-in after it and a
change are on it, and the change opens to its fields before and after."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.browser.conftest import Panel
from trinity.audit.models import AuditEntry

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password


def test_an_admin_reads_sign_ins_and_a_change_on_the_audit_page(
    panel: Panel, admin_user: User
) -> None:
    AuditEntry.objects.create(
        actor_kind="system",
        source="manage.py",
        action="subscription.update",
        object_type="subscription",
        object_label="plan-a",
        changes={"paused": [False, True]},
    )
    page = panel.page
    panel.goto("/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Those credentials were not accepted")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("signed-in-as")).to_contain_text("admin")

    panel.open("audit")
    rows = page.get_by_test_id("audit-entry")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("sign_in")
    expect(rows.nth(1)).to_contain_text("sign_in.failed")
    expect(rows.nth(1)).to_contain_text("admin (not signed in)")
    rows.nth(2).get_by_role("button").click()
    expect(page.get_by_test_id("audit-changes")).to_contain_text("paused")
