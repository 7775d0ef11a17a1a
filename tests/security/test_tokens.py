"""API tokens at rest: a digest in the database, the key shown once, optional expiry,
no key in Django admin, and keys issued before digests still sign in.

Tokens are issued through the public doors (``manage.py api_token``, the admin-only
``POST /api/auth/tokens``, the admin's add form) and used as a client uses them
(``Authorization: Token <key>``), so these tests say nothing about how tokens are
stored beyond what a reader of the database or the admin could see.
"""

from __future__ import annotations

import importlib
import io
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

START = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def _issue(username: str, *args: str) -> str:
    out = io.StringIO()
    call_command("api_token", username, *args, stdout=out)
    return out.getvalue().strip()


def _status_with(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/agents").status_code


def _database_text() -> str:
    """Every row of every table, as text: what a reader of the database file sees."""
    chunks: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


def test_the_database_holds_no_token_plaintext(owner: User, admin_client_api: APIClient) -> None:
    from_command = _issue("owner")
    response = admin_client_api.post("/api/auth/tokens", {"username": "owner"}, format="json")
    from_api = response.json()["token"]
    assert _status_with(from_command) == 200
    assert _status_with(from_api) == 200
    stored = _database_text()
    for key in (from_command, from_api):
        # The first 15 characters are kept to find the row by; the rest never is.
        assert key not in stored
        assert key[15:] not in stored


def test_a_token_is_shown_once_and_issuing_again_gives_a_new_one(owner: User) -> None:
    first = _issue("owner")
    second = _issue("owner")
    assert first != second  # nothing can show the first again: only its digest is kept
    assert _status_with(first) == 200
    assert _status_with(second) == 200
    third = _issue("owner", "--rotate")
    assert _status_with(first) == 401
    assert _status_with(second) == 401
    assert _status_with(third) == 200


def test_a_token_stops_working_when_it_expires(owner: User) -> None:
    with time_machine.travel(START, tick=False) as clock:
        key = _issue("owner", "--expires-in-days", "2")
        clock.shift(timedelta(days=2) - timedelta(seconds=1))
        assert _status_with(key) == 200
        clock.shift(timedelta(seconds=2))
        assert _status_with(key) == 401


def test_the_endpoint_says_when_its_token_expires(admin_client_api: APIClient, owner: User) -> None:
    with time_machine.travel(START, tick=False):
        body = admin_client_api.post(
            "/api/auth/tokens", {"username": "owner", "expires_in_days": 30}, format="json"
        ).json()
        assert datetime.fromisoformat(body["expires_at"]) == START + timedelta(days=30)
        unbounded = admin_client_api.post(
            "/api/auth/tokens", {"username": "owner"}, format="json"
        ).json()
        assert unbounded["expires_at"] is None  # TRINITY_API_TOKEN_TTL_DAYS unset: none


def test_the_default_lifetime_comes_from_the_setting(
    admin_client_api: APIClient, owner: User, settings: Any
) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": timedelta(days=7)}
    with time_machine.travel(START, tick=False) as clock:
        key = admin_client_api.post(
            "/api/auth/tokens", {"username": "owner"}, format="json"
        ).json()["token"]
        clock.shift(timedelta(days=7, seconds=1))
        assert _status_with(key) == 401


def test_the_admin_lists_tokens_without_their_key(admin_user: User, owner: User) -> None:
    keys = [_issue("owner"), _issue("admin")]
    client = APIClient()
    client.force_login(admin_user)
    # Before digests the tokens were DRF's (their admin: authtoken/tokenproxy).
    pages = [client.get(url) for url in ("/admin/knox/authtoken/", "/admin/authtoken/tokenproxy/")]
    listed = [page for page in pages if page.status_code == 200]
    assert listed, [page.status_code for page in pages]
    text = "\n".join(page.content.decode() for page in listed)
    assert "owner" in text
    for key in keys:
        assert key[8:] not in text  # at most the first 8 characters, to tell tokens apart


def test_the_admin_add_form_shows_the_new_key_once(admin_user: User, owner: User) -> None:
    client = Client()  # a browser's form post
    client.force_login(admin_user)
    added = client.post("/admin/knox/authtoken/add/", {"user": owner.pk, "expiry": ""}, follow=True)
    assert added.status_code == 200
    text = added.content.decode()
    start = text.index("shown only now: ") + len("shown only now: ")
    key = text[start : start + 64]
    assert _status_with(key) == 200
    again = client.get("/admin/knox/authtoken/").content.decode()
    assert key[8:] not in again


class _Editor:
    """What the migration's function uses of a schema editor."""

    def __init__(self) -> None:
        self.connection = connection

    def execute(self, sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)


def test_a_key_issued_before_digests_still_signs_in_after_the_migration(owner: User) -> None:
    """A client holding a DRF authtoken key (40 hex characters) keeps its header; the
    plaintext table is gone afterwards."""
    legacy_key = secrets.token_hex(20)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created varchar(40) NOT NULL, user_id integer NOT NULL)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [legacy_key, START.isoformat(), owner.pk],
        )
    migration = importlib.import_module("trinity.migrations.0006_api_tokens_as_digests")
    migration.keep_legacy_tokens_as_digests(apps, _Editor())
    assert "authtoken_token" not in connection.introspection.table_names()
    assert legacy_key not in _database_text()
    assert _status_with(legacy_key) == 200
    assert _status_with(legacy_key[:-1] + ("0" if legacy_key[-1] != "0" else "1")) == 401


def test_the_migration_does_nothing_where_authtoken_never_was(owner: User) -> None:
    migration = importlib.import_module("trinity.migrations.0006_api_tokens_as_digests")
    migration.keep_legacy_tokens_as_digests(apps, _Editor())
    assert _status_with(_issue("owner")) == 200
