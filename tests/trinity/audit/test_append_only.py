"""The log cannot be changed: not through the API (405 on every write method), not
through Django admin (no add, change or delete, superusers included), not by the ORM
or raw SQL (the database's trigger refuses), and only the retention prune deletes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from rest_framework.test import APIClient

from trinity import clock
from trinity.audit.models import AuditEntry
from trinity.audit.services import audit_prune

pytestmark = pytest.mark.django_db


def _entry(**fields: object) -> AuditEntry:
    values = {"actor_kind": "system", "source": "system", "action": "test.made"} | fields
    return AuditEntry.objects.create(**values)


@pytest.mark.parametrize("url", ["/api/audit", "/api/audit/export"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_the_api_has_no_write_method(admin_client_api: APIClient, url: str, method: str) -> None:
    entry = _entry()
    response = getattr(admin_client_api, method)(url, {"action": "x"}, format="json")
    assert response.status_code == 405
    entry.refresh_from_db()
    assert entry.action == "test.made"


def test_django_admin_shows_the_log_but_refuses_every_change(admin_user: object) -> None:
    entry = _entry(object_label="kept")
    client = Client()
    client.force_login(admin_user)  # type: ignore[arg-type]
    base = "/admin/audit/auditentry/"
    assert client.get(base).status_code == 200
    assert client.get(f"{base}add/").status_code == 403
    assert client.post(f"{base}{entry.pk}/change/", {"action": "forged"}).status_code == 403
    assert client.get(f"{base}{entry.pk}/delete/").status_code == 403
    assert client.post(f"{base}{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    entry.refresh_from_db()
    assert (entry.action, entry.object_label) == ("test.made", "kept")


def test_the_database_refuses_an_update_by_the_orm_and_by_sql() -> None:
    entry = _entry()
    entry.action = "forged"
    with pytest.raises(DatabaseError), transaction.atomic():
        entry.save()
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditentry SET action = 'forged'")
    assert AuditEntry.objects.get(pk=entry.pk).action == "test.made"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite keeps DELETE open")
def test_postgres_refuses_a_delete_by_the_orm_and_by_sql() -> None:
    entry = _entry()
    with pytest.raises(DatabaseError), transaction.atomic():
        entry.delete()
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditentry")
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_the_prune_deletes_only_entries_past_the_retention(settings: object) -> None:
    now = clock.now()
    old = _entry(created_at=now - timedelta(days=400))
    edge = _entry(created_at=now - timedelta(days=365))
    new = _entry(created_at=now - timedelta(days=1))
    settings.TRINITY_AUDIT_RETENTION_DAYS = 365  # type: ignore[attr-defined]
    assert audit_prune(now=now) == 1
    assert set(AuditEntry.objects.values_list("pk", flat=True)) == {edge.pk, new.pk}
    assert not AuditEntry.objects.filter(pk=old.pk).exists()


def test_a_retention_of_zero_keeps_everything(settings: object) -> None:
    now = clock.now()
    _entry(created_at=now - timedelta(days=4000))
    settings.TRINITY_AUDIT_RETENTION_DAYS = 0  # type: ignore[attr-defined]
    assert audit_prune(now=now) == 0
    assert AuditEntry.objects.count() == 1
