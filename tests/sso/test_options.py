"""What the panel learns before sign-in, and the provider's views while SSO is off."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_with_sso_off_the_options_say_passwords_only_and_its_views_are_404(
    settings: Any, client: Client
) -> None:
    settings.TRINITY_OIDC_DISCOVERY_URL = ""
    assert client.get("/api/auth/options").json() == {
        "sso": {"enabled": False, "label": "", "start_url": ""},
        "local_passwords": True,
    }
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


def test_with_sso_on_the_options_name_the_provider_and_where_to_start(
    settings: Any, client: Client
) -> None:
    settings.TRINITY_OIDC_DISCOVERY_URL = "https://id.example.test/realms/team"
    settings.TRINITY_OIDC_PROVIDER_NAME = "Acme SSO"
    settings.TRINITY_LOCAL_PASSWORDS = False
    assert client.get("/api/auth/options").json() == {
        "sso": {"enabled": True, "label": "Acme SSO", "start_url": "/oidc/authenticate/"},
        "local_passwords": False,
    }


def test_an_unreachable_provider_sends_the_browser_back_with_an_error(
    settings: Any, client: Client
) -> None:
    settings.TRINITY_OIDC_DISCOVERY_URL = "http://127.0.0.1:9/nothing-listens"
    answer = client.get("/oidc/authenticate/")
    assert (answer.status_code, answer["Location"]) == (302, "/?sso_error=unavailable")


def test_admins_login_page_offers_the_providers_sign_in_only_when_it_is_on(
    settings: Any, client: Client
) -> None:
    settings.TRINITY_OIDC_DISCOVERY_URL = ""
    assert "Sign in with" not in client.get("/admin/login/?next=/admin/").text
    settings.TRINITY_OIDC_DISCOVERY_URL = "https://id.example.test"
    settings.TRINITY_OIDC_PROVIDER_NAME = "Acme SSO"
    page = client.get("/admin/login/?next=/admin/").text
    assert (
        '<a class="button" href="/oidc/authenticate/?next=/admin/">Sign in with Acme SSO</a>'
        in page
    )
    assert 'name="password"' in page  # the break-glass admin's form stays
