"""Single sign-on in a real browser: the panel's "Sign in with ..." through the test
provider's login page and back, signed in; sign-out through the provider's end
session; the password form hidden behind the break-glass link when passwords are off;
a failed sign-in explained on the panel."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.browser.conftest import Panel
from tests.sso.conftest import PROVIDER_NAME
from tests.sso.provider import ADMINS, IdentityProvider
from trinity.sso.models import SsoIdentity

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "idp-pw-for-tests"


def provider_sign_in(panel: Panel, username: str) -> None:
    page = panel.page
    panel.goto("/")
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    expect(page.get_by_role("heading", name="Test identity provider")).to_be_visible()
    form = page.get_by_role("form", name="Sign in to the provider")
    form.get_by_label("Username").fill(username)
    form.get_by_label("Password").fill(PASSWORD)
    form.get_by_role("button", name="Sign in to the provider").click()


def test_sign_in_with_the_provider_lands_signed_in_and_sign_out_ends_it_there_too(
    panel: Panel, sso: IdentityProvider
) -> None:
    page = panel.page
    subject = sso.user("frank", password=PASSWORD, email="frank@example.test", groups=[ADMINS])

    provider_sign_in(panel, "frank")

    expect(page.get_by_test_id("signed-in-as")).to_have_text("Signed in as frank (admin)")
    assert page.url == f"{panel.base_url}/"
    assert SsoIdentity.objects.get(subject=subject).user.is_staff

    page.get_by_role("button", name="Sign out").click()
    # The provider asks to confirm its own sign-out, then sends the browser back.
    page.get_by_role("button", name="Logout").click()
    expect(page.get_by_role("heading", name="Sign in to Trinity")).to_be_visible()
    assert page.url == f"{panel.base_url}/"
    assert page.request.get(f"{panel.base_url}/api/auth/me").status == 401
    # Signed out at the provider too: its login page asks again.
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    expect(page.get_by_role("form", name="Sign in to the provider")).to_be_visible()


def test_with_passwords_off_only_the_break_glass_link_opens_the_password_form(
    panel: Panel, sso: IdentityProvider, settings: Any
) -> None:
    settings.TRINITY_LOCAL_PASSWORDS = False
    settings.TRINITY_BREAK_GLASS_USERS = ["root"]
    User.objects.create_user("ops", password=PASSWORD)
    User.objects.create_user("root", password=PASSWORD, is_staff=True)
    page = panel.page
    panel.goto("/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")).to_be_visible()
    expect(page.get_by_label("Password")).to_have_count(0)
    panel.screenshot("sso-passwords-off")

    page.get_by_role("button", name="Break-glass admin sign-in").click()
    page.get_by_label("Username").fill("ops")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Password sign-in is turned off here")

    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_test_id("signed-in-as")).to_have_text("Signed in as root (admin)")


def test_a_failed_sign_in_is_explained_on_the_panel(panel: Panel, sso: IdentityProvider) -> None:
    page = panel.page
    panel.goto("/oidc/callback/?error=access_denied&state=x")
    expect(page.get_by_test_id("sso-error")).to_have_text(
        f"Sign-in with {PROVIDER_NAME} was cancelled or refused."
    )
    assert page.url == f"{panel.base_url}/"
