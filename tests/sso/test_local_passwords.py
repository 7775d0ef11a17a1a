"""Local passwords turned off: the panel's login, admin's login and any other password
path refuse everyone but the break-glass users, before the password is checked."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"


@pytest.fixture
def passwords_off(settings: Any) -> None:
    settings.TRINITY_OIDC_DISCOVERY_URL = "https://id.example.test"
    settings.TRINITY_OIDC_PROVIDER_NAME = "Acme SSO"
    settings.TRINITY_LOCAL_PASSWORDS = False
    settings.TRINITY_BREAK_GLASS_USERS = ["root"]


@pytest.fixture
def people(db: None) -> tuple[User, User]:
    staff = User.objects.create_user("ops", password=PASSWORD, is_staff=True, is_superuser=True)
    root = User.objects.create_user("root", password=PASSWORD, is_staff=True, is_superuser=True)
    return staff, root


def panel_login(client: Client, username: str) -> Any:
    return client.post(
        "/api/auth/login",
        {"username": username, "password": PASSWORD},
        content_type="application/json",
    )


def admin_login(client: Client, username: str) -> Any:
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": PASSWORD, "next": "/admin/"},
    )


def test_the_panel_refuses_a_password_and_points_at_the_provider(
    passwords_off: None, people: tuple[User, User], client: Client
) -> None:
    answer = panel_login(client, "ops")
    assert answer.status_code == 403
    assert answer.json() == {
        "detail": "Password sign-in is turned off here. Sign in with Acme SSO instead "
        "(/oidc/authenticate/).",
        "code": "sso_required",
    }
    assert client.get("/api/auth/me").status_code == 401


def test_admins_login_refuses_a_password_too(
    passwords_off: None, people: tuple[User, User], client: Client
) -> None:
    answer = admin_login(client, "ops")
    assert answer.status_code == 200  # the form again, with the refusal
    assert "Password sign-in is turned off here. Sign in with Acme SSO" in answer.text
    assert client.get("/admin/").status_code == 302


def test_no_other_path_takes_a_password(passwords_off: None, people: tuple[User, User]) -> None:
    assert authenticate(username="ops", password=PASSWORD) is None
    assert authenticate(username="root", password=PASSWORD) is not None


def test_the_break_glass_user_still_signs_in_with_a_password_in_both(
    passwords_off: None, people: tuple[User, User], client: Client
) -> None:
    assert panel_login(client, "root").json() == {"username": "root", "is_admin": True}
    other = Client()
    answer = admin_login(other, "root")
    assert (answer.status_code, answer["Location"]) == (302, "/admin/")
    assert other.get("/admin/").status_code == 200


def test_with_local_passwords_on_everyone_signs_in_as_before(
    settings: Any, people: tuple[User, User], client: Client
) -> None:
    settings.TRINITY_LOCAL_PASSWORDS = True
    assert panel_login(client, "ops").json() == {"username": "ops", "is_admin": True}
