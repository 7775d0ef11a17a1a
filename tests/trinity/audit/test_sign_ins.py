"""Sign-ins, failed sign-ins and sign-outs: each request one entry naming the user
(a failed one the attempted username, as text only, never the password); a sign-in
outside an audited request (single sign-on's callback is a GET) an entry of its own.
And management commands record themselves as the system, from manage.py."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import login
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.test import Client, RequestFactory

from tests.agents.factories import UserFactory
from trinity.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-AUDITcanary-battery"  # noqa: S105 - a test password


@pytest.fixture
def person() -> User:
    user: User = UserFactory.create(username="carol", is_staff=True, is_superuser=True)
    user.set_password(PASSWORD)
    user.save()
    return user


def _new_entries(before: int) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(id__gt=before).order_by("id"))


def _last_id() -> int:
    return AuditEntry.objects.order_by("-id").values_list("id", flat=True).first() or 0


def _login(client: Client, password: str) -> int:
    body = json.dumps({"username": "carol", "password": password})
    return client.post("/api/auth/login", body, content_type="application/json").status_code


def test_a_panel_sign_in_and_sign_out_are_one_entry_each(person: User) -> None:
    client, before = Client(), _last_id()
    assert _login(client, PASSWORD) == 200
    [entry] = _new_entries(before)
    assert (entry.action, entry.actor_kind, entry.actor_user_id, entry.source) == (
        "sign_in",
        "user",
        person.pk,
        "panel",
    )
    before = _last_id()
    assert client.post("/api/auth/logout").status_code == 204
    [entry] = _new_entries(before)
    assert (entry.action, entry.actor_username) == ("sign_out", "carol")


def test_a_sign_out_without_a_session_is_not_recorded() -> None:
    before = _last_id()
    assert Client().post("/api/auth/logout").status_code == 204
    assert _new_entries(before) == []


def test_a_failed_sign_in_names_the_attempt_and_never_the_password(person: User) -> None:
    before = _last_id()
    assert _login(Client(), "wrong-AUDITcanary-password") == 400
    [entry] = _new_entries(before)
    assert (entry.action, entry.actor_kind, entry.actor_user_id, entry.actor_username) == (
        "sign_in.failed",
        "anonymous",
        None,
        "carol",
    )
    assert entry.status_code == 400
    text = json.dumps(entry.changes) + str(vars(entry))
    assert "AUDITcanary" not in text


def test_an_admin_sign_in_is_one_entry_from_the_admin(person: User) -> None:
    client, before = Client(), _last_id()
    response = client.post("/admin/login/", {"username": "carol", "password": PASSWORD})
    assert response.status_code == 302
    [entry] = _new_entries(before)
    assert (entry.action, entry.source, entry.actor_username) == ("sign_in", "admin", "carol")


def test_a_sign_in_outside_an_audited_request_is_an_entry_of_its_own(person: User) -> None:
    # Single sign-on's callback is a GET, which the middleware passes by.
    request = RequestFactory().get("/oidc/callback/", REMOTE_ADDR="192.0.2.7")
    request.session = SessionStore()
    before = _last_id()
    login(request, person, backend="django.contrib.auth.backends.ModelBackend")
    [entry] = _new_entries(before)
    assert (entry.action, entry.actor_username, entry.address, entry.method) == (
        "sign_in",
        "carol",
        "192.0.2.7",
        "GET",
    )


def test_an_admin_change_to_a_user_keeps_the_password_by_fingerprint(person: User) -> None:
    client = Client()
    client.force_login(person)
    before = _last_id()
    response = client.post(
        f"/admin/auth/user/{person.pk}/password/",
        {"password1": "new-AUDITcanary-pass-1", "password2": "new-AUDITcanary-pass-1"},
    )
    assert response.status_code == 302, response.content[:300]
    [entry] = _new_entries(before)
    assert (entry.action, entry.source, entry.object_id) == (
        "user.password_change",  # named as sign-ins name users, not ``auth.user``
        "admin",
        str(person.pk),
    )
    # The hash changed, shown by its last 4 characters only.
    before_mark, after_mark = entry.changes["password"]
    assert before_mark != after_mark and after_mark.startswith("…") and len(after_mark) == 5
    assert "AUDITcanary" not in json.dumps(entry.changes)


def test_an_admin_change_is_one_entry_with_the_fields_it_changed(person: User) -> None:
    from trinity.selectors import system_settings_get

    row = system_settings_get()
    client = Client()
    client.force_login(person)
    before = _last_id()
    response = client.post(
        f"/admin/trinity/systemsettings/{row.pk}/change/",
        {"auto_switch_subscriptions": "on", "headroom_alert_threshold": "90"},
    )
    assert response.status_code == 302, response.content[:500]
    [entry] = _new_entries(before)
    assert (entry.action, entry.source, entry.actor_username) == (
        "trinity.systemsettings.update",
        "admin",
        "carol",
    )
    assert entry.changes["headroom_alert_threshold"] == [75, 90]
    # A form Django admin shows again with its errors changed nothing: no entry.
    before = _last_id()
    refused = client.post(
        f"/admin/trinity/systemsettings/{row.pk}/change/", {"headroom_alert_threshold": "x"}
    )
    assert refused.status_code == 200
    assert _new_entries(before) == []
    # Nor does a login form sent without a password (no sign-in was attempted).
    assert Client().post("/admin/login/", {"username": "carol"}).status_code == 200
    assert _new_entries(before) == []


def test_a_management_command_records_the_system_from_manage_py(person: User) -> None:
    before = _last_id()
    call_command("api_token", "carol", stdout=io.StringIO())
    [entry] = _new_entries(before)
    assert (entry.action, entry.actor_kind, entry.source, entry.object_label) == (
        "api_token.create",
        "system",
        "manage.py",
        "carol",
    )
