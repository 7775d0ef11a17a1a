"""The gateway's rows in Django's admin: readable, never writable, keys revocable."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from gateway.models import GatewayKey
from tests.gateway.factories import GatewayKeyFactory, GatewayUsageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_site(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_rows_are_read_only_and_a_key_form_shows_no_digest(admin_site: Client, owner: User) -> None:
    usage = GatewayUsageFactory.create(key=GatewayKeyFactory.create(owner=owner, name="laptop"))
    key = usage.key
    page = admin_site.get(f"/admin/gateway/gatewaykey/{key.pk}/change/")
    assert page.status_code == 200
    assert "laptop" in page.content.decode() and key.digest not in page.content.decode()
    for model in ("gatewaykey", "gatewayusage", "gatewaysession"):
        assert admin_site.get(f"/admin/gateway/{model}/add/").status_code == 403
    changed = admin_site.post(f"/admin/gateway/gatewaykey/{key.pk}/change/", {"name": "renamed"})
    assert changed.status_code == 403
    assert admin_site.post(f"/admin/gateway/gatewaykey/{key.pk}/delete/").status_code == 403
    assert GatewayKey.objects.get(pk=key.pk).name == "laptop"
    assert admin_site.get(f"/admin/gateway/gatewayusage/{usage.pk}/change/").status_code == 200


def test_the_revoke_action_revokes_through_the_service(admin_site: Client, owner: User) -> None:
    first, second = GatewayKeyFactory.create_batch(2, owner=owner)
    response = admin_site.post(
        "/admin/gateway/gatewaykey/",
        {"action": "revoke", "_selected_action": [first.pk]},
    )
    assert response.status_code == 302
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.revoked_at is not None and first.updated_at == first.revoked_at
    assert second.revoked_at is None
