from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client, override_settings

from tests.agents.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
BUILD_HINT = "run `cd frontend && npm ci && npm run build` first"


@pytest.fixture
def operator() -> User:
    return UserFactory.create(username="operator", password=PASSWORD)


@pytest.fixture
def admin() -> User:
    return UserFactory.create(username="root", password=PASSWORD, is_staff=True)


@pytest.fixture
def browser_client() -> Client:
    """A client that enforces CSRF like a browser does (the default test client skips it)."""
    return Client(enforce_csrf_checks=True)


def _csrf(client: Client) -> str:
    assert client.get("/api/auth/csrf").status_code == 204
    return client.cookies["csrftoken"].value


def _login(client: Client, username: str, password: str, *, csrf: str | None = None):
    token = csrf if csrf is not None else _csrf(client)
    return client.post(
        "/api/auth/login",
        data=json.dumps({"username": username, "password": password}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )


def test_csrf_endpoint_sets_the_cookie(browser_client: Client) -> None:
    response = browser_client.get("/api/auth/csrf")
    assert response.status_code == 204
    assert response.cookies["csrftoken"].value


def test_login_starts_a_session_and_me_reports_the_user(
    browser_client: Client, operator: User
) -> None:
    response = _login(browser_client, "operator", PASSWORD)
    assert response.status_code == 200
    assert response.json() == {"username": "operator", "is_admin": False}
    assert browser_client.get("/api/auth/me").json() == {"username": "operator", "is_admin": False}
    # The session is the one the REST API uses.
    assert browser_client.get("/api/subscriptions").status_code == 200


def test_me_says_admin_for_staff(browser_client: Client, admin: User) -> None:
    assert _login(browser_client, "root", PASSWORD).json() == {"username": "root", "is_admin": True}


@pytest.mark.parametrize(
    ("username", "password"),
    [("operator", "wrong password"), ("nobody", PASSWORD), ("nobody", "wrong password")],
)
def test_bad_credentials_get_one_answer_that_does_not_say_which_part_was_wrong(
    browser_client: Client, operator: User, username: str, password: str
) -> None:
    response = _login(browser_client, username, password)
    assert response.status_code == 400
    assert response.json() == {
        "detail": "Those credentials were not accepted. Check them and try again."
    }
    assert browser_client.get("/api/auth/me").status_code == 401


def test_an_inactive_user_cannot_sign_in(browser_client: Client, operator: User) -> None:
    operator.is_active = False
    operator.save()
    assert _login(browser_client, "operator", PASSWORD).status_code == 400


@pytest.mark.parametrize(
    "body", ["not json", json.dumps([1, 2]), json.dumps({"username": "operator"})]
)
def test_login_rejects_malformed_bodies(browser_client: Client, operator: User, body: str) -> None:
    token = _csrf(browser_client)
    response = browser_client.post(
        "/api/auth/login",
        data=body,
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 400
    assert "detail" in response.json()


def test_login_without_the_csrf_token_is_refused_with_json(
    browser_client: Client, operator: User
) -> None:
    _csrf(browser_client)
    response = _login(browser_client, "operator", PASSWORD, csrf="")
    assert response.status_code == 403
    assert "Reload the page" in response.json()["detail"]
    assert browser_client.get("/api/auth/me").status_code == 401


def test_a_csrf_failure_outside_the_api_keeps_djangos_page(
    browser_client: Client, admin: User
) -> None:
    response = browser_client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")


def test_login_only_accepts_post(browser_client: Client) -> None:
    assert browser_client.get("/api/auth/login").status_code == 405


def test_logout_ends_the_session(browser_client: Client, operator: User) -> None:
    assert _login(browser_client, "operator", PASSWORD).status_code == 200
    token = browser_client.cookies["csrftoken"].value  # login rotates it
    response = browser_client.post("/api/auth/logout", headers={"X-CSRFToken": token})
    assert response.status_code == 204
    assert browser_client.get("/api/auth/me").status_code == 401
    # Signed out: a 401 that names the scheme an API client can use instead.
    assert browser_client.get("/api/subscriptions").status_code == 401


def test_logout_is_csrf_protected(browser_client: Client, operator: User) -> None:
    assert _login(browser_client, "operator", PASSWORD).status_code == 200
    assert browser_client.post("/api/auth/logout").status_code == 403
    assert browser_client.get("/api/auth/me").status_code == 200


def test_me_without_a_session_is_401(browser_client: Client) -> None:
    response = browser_client.get("/api/auth/me")
    assert response.status_code == 401
    assert response.json() == {"detail": "Not signed in."}


def _built_index() -> str:
    index = settings.PANEL_DIST_DIR / "index.html"
    if not index.exists():
        pytest.fail(f"{index} is missing: {BUILD_HINT}")
    return index.read_text(encoding="utf-8")


def test_the_panel_is_served_at_the_root_with_its_assets_resolving(browser_client: Client) -> None:
    built = _built_index()
    response = browser_client.get("/")
    assert response.status_code == 200
    assert response.content.decode() == built
    assert "csrftoken" in response.cookies
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert "no-cache" in response["Cache-Control"]
    assets = re.findall(r'(?:src|href)="(/static/panel/[^"]+)"', built)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for url in assets:
        relative = url.removeprefix(settings.STATIC_URL)
        assert finders.find(relative), f"{url} does not resolve to a static file"


def test_without_a_build_the_root_says_how_to_build(browser_client: Client, tmp_path: Path) -> None:
    with override_settings(PANEL_DIST_DIR=tmp_path):
        response = browser_client.get("/")
    assert response.status_code == 503
    assert "npm run build" in response.content.decode()
