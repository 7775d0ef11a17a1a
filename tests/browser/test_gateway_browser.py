"""The Gateway page in a real browser: an operator creates a key, sees it once (with
a warning and a working copy button), then never again, and revokes it.

Real processes: the live server, headless Chromium, the test database and Redis.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from gateway.keys import KEY_PREFIX, key_digest
from gateway.models import GatewayKey
from tests.browser.conftest import Panel

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"  # the user factory's password


def test_an_operator_creates_a_key_sees_it_once_and_revokes_it(panel: Panel, owner: User) -> None:
    page = panel.page
    panel.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=panel.base_url)
    panel.sign_in("owner", PASSWORD)
    panel.open("gateway")
    expect(page.get_by_test_id("no-keys")).to_be_visible()

    page.get_by_role("button", name="Create key").click()
    form = page.get_by_role("form", name="Create a gateway key")
    form.get_by_label("Name").fill("laptop")
    form.get_by_label("anthropic").check()
    form.get_by_label("Tokens per day (UTC)").fill("100000")
    form.get_by_role("button", name="Create key").click()

    notice = page.get_by_test_id("created-key")
    expect(notice).to_contain_text("this is the only time it is shown")
    key = page.get_by_test_id("new-key").input_value()
    assert key.startswith(KEY_PREFIX)
    stored = GatewayKey.objects.get(owner=owner)
    assert (stored.name, stored.digest, stored.providers, stored.daily_tokens) == (
        "laptop",
        key_digest(key),
        ["anthropic"],
        100_000,
    )
    row = page.locator("tr[data-key='laptop']")
    expect(row.get_by_test_id("key-prefix")).to_have_text(f"{KEY_PREFIX}{stored.prefix}…")
    expect(row.get_by_test_id("key-limits")).to_have_text("100,000 tokens/day")

    notice.get_by_role("button", name="Copy").click()
    expect(notice.get_by_role("status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == key
    panel.screenshot("gateway-key-created")

    # So far the key reached the browser once: in the answer to its creation.
    assert panel.received_text().count(key) == 1
    notice.get_by_role("button", name="Done, I've copied it").click()
    expect(notice).to_have_count(0)
    assert key not in page.content()
    seen = len(panel.responses)
    page.reload()
    expect(row.get_by_test_id("key-status")).to_have_text("Active")
    assert key not in page.content()

    row.get_by_role("button", name="Revoke").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog).to_contain_text("Revoke laptop?")
    dialog.get_by_role("button", name="Revoke laptop").click()
    expect(row.get_by_test_id("key-status")).to_have_text("Revoked")
    expect(row.get_by_role("button", name="Revoke")).to_have_count(0)
    stored.refresh_from_db()
    assert stored.revoked_at is not None

    # Nothing since (the list, usage, the revoke) carried it again.
    panel.responses = panel.responses[seen:]
    assert "laptop" in panel.received_text()
    assert key not in panel.received_text()
