"""Getting into the API without the panel: an API token from ``manage.py api_token``
or the admin-only ``POST /api/auth/tokens``, a 401 that says how to authenticate, and
JSON (413) for an oversized body under ``/api/``. (At rest and expiry:
``tests/security/test_tokens.py``.)"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.agents.factories import UserFactory

pytestmark = pytest.mark.django_db

TOKENS = "/api/auth/tokens"


def _logged_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records)


def _token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


class TestTokenCommand:
    def test_it_prints_a_working_token_once_and_never_logs_it(
        self, owner: User, caplog: pytest.LogCaptureFixture
    ) -> None:
        out = io.StringIO()
        with caplog.at_level(logging.DEBUG):
            call_command("api_token", "owner", stdout=out)
        key = out.getvalue().strip()
        assert AuthToken.objects.get(user=owner).token_key == key[:15]
        assert _token_client(key).get("/api/agents").status_code == 200
        assert key not in _logged_text(caplog)

    def test_rotate_replaces_the_token_and_the_old_one_stops_working(self, owner: User) -> None:
        _, old = AuthToken.objects.create(user=owner)
        out = io.StringIO()
        call_command("api_token", "owner", "--rotate", stdout=out)
        new = out.getvalue().strip()
        assert new != old
        assert _token_client(old).get("/api/agents").status_code == 401
        assert _token_client(new).get("/api/agents").status_code == 200

    def test_an_expiry_outside_its_range_is_a_command_error_that_creates_nothing(
        self, owner: User
    ) -> None:
        with pytest.raises(CommandError, match="expires-in-days"):
            call_command("api_token", "owner", "--expires-in-days", "0", stdout=io.StringIO())
        assert not AuthToken.objects.exists()

    def test_an_unknown_user_is_a_command_error_that_creates_nothing(self) -> None:
        with pytest.raises(CommandError, match="nobody"):
            call_command("api_token", "nobody", stdout=io.StringIO())
        assert not AuthToken.objects.exists()


class TestTokenEndpoint:
    def test_an_admin_gets_a_users_token_once_and_it_is_never_logged(
        self, admin_client_api: APIClient, owner: User, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.DEBUG):
            response = admin_client_api.post(TOKENS, {"username": "owner"}, format="json")
        assert response.status_code == 200, response.content
        body = response.json()
        key = body["token"]
        assert body == {"username": "owner", "token": key, "expires_at": None}
        assert AuthToken.objects.get(user=owner).token_key == key[:15]
        assert "no-store" in response["Cache-Control"]
        assert key not in _logged_text(caplog)
        assert _token_client(key).get("/api/agents").status_code == 200

    def test_rotate_issues_a_new_token(self, admin_client_api: APIClient, owner: User) -> None:
        old_row, old = AuthToken.objects.create(user=owner)
        response = admin_client_api.post(
            TOKENS, {"username": "owner", "rotate": True}, format="json"
        )
        assert response.status_code == 200
        assert response.json()["token"] != old
        assert not AuthToken.objects.filter(digest=old_row.digest).exists()

    def test_owner_and_other_user_are_refused_and_nothing_is_issued(
        self, owner_client: APIClient, other_client: APIClient, admin_user: User
    ) -> None:
        for client in (owner_client, other_client):
            for username in ("owner", "other", "admin"):
                response = client.post(TOKENS, {"username": username}, format="json")
                assert response.status_code == 403
                assert "token" not in response.json()
        assert not AuthToken.objects.exists()

    def test_signed_out_gets_401(self, anon_client: APIClient, owner: User) -> None:
        assert anon_client.post(TOKENS, {"username": "owner"}, format="json").status_code == 401
        assert not AuthToken.objects.exists()

    @pytest.mark.parametrize(
        ("body", "status", "field"),
        [({}, 400, "username"), ({"username": "nobody"}, 404, "detail")],
    )
    def test_bad_input(
        self, admin_client_api: APIClient, body: dict[str, str], status: int, field: str
    ) -> None:
        response = admin_client_api.post(TOKENS, body, format="json")
        assert response.status_code == status
        assert field in response.json()
        assert not AuthToken.objects.exists()

    def test_an_inactive_user_gets_no_token(self, admin_client_api: APIClient) -> None:
        UserFactory.create(username="gone", is_active=False)
        response = admin_client_api.post(TOKENS, {"username": "gone"}, format="json")
        assert response.status_code == 400
        assert "username" in response.json()
        assert not AuthToken.objects.exists()


class TestUnauthenticated:
    def test_a_call_without_credentials_is_401_and_says_how_to_authenticate(
        self, anon_client: APIClient
    ) -> None:
        response = anon_client.get("/api/agents")
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Token"
        assert "detail" in response.json()

    def test_a_bad_token_is_401(self) -> None:
        assert _token_client("0" * 40).get("/api/agents").status_code == 401

    def test_the_panels_session_still_needs_its_csrf_token_for_writes(self, owner: User) -> None:
        browser = Client(enforce_csrf_checks=True)
        browser.get("/api/auth/csrf")
        csrf = browser.cookies["csrftoken"].value
        signed_in = browser.post(
            "/api/auth/login",
            json.dumps({"username": "owner", "password": "pw-for-tests-only"}),
            content_type="application/json",
            HTTP_X_CSRFTOKEN=csrf,
        )
        assert signed_in.status_code == 200
        assert browser.get("/api/agents").status_code == 200
        body = json.dumps({"name": "bot", "auto_assign": False})
        refused = browser.post("/api/agents", body, content_type="application/json")
        assert refused.status_code == 403  # a session write without CSRF stays refused
        csrf = browser.cookies["csrftoken"].value  # login rotates it
        created = browser.post(
            "/api/agents", body, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
        )
        assert created.status_code == 201, created.content


class TestOversizedBody:
    @pytest.fixture
    def too_big(self, settings: object) -> str:
        from django.conf import settings as django_settings

        return json.dumps({"name": "x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})

    def test_an_api_view_answers_413_json(self, owner_client: APIClient, too_big: str) -> None:
        response = owner_client.post("/api/agents", too_big, content_type="application/json")
        assert response.status_code == 413
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "too_large"

    def test_the_panels_sign_in_answers_413_json(self, too_big: str) -> None:
        response = Client().post("/api/auth/login", too_big, content_type="application/json")
        assert response.status_code == 413
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "too_large"

    def test_outside_the_api_django_keeps_its_own_page(self, too_big: str) -> None:
        response = Client().post(
            "/admin/login/", too_big, content_type="application/x-www-form-urlencoded"
        )
        assert response.status_code == 400
        assert response["Content-Type"].startswith("text/html")
