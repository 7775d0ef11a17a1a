"""A gateway key is in its create answer, once, and nowhere else: no other answer of
the API or the admin, no stored column, no log line (raw or as the console renders
it). A careless log line that names one is masked by the platform's redaction."""

from __future__ import annotations

import io
import logging

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from gateway.models import GatewayKey
from tests.gateway.factories import GatewayUsageFactory
from tests.test_secrets_canary import rendered_logs  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def test_a_key_reaches_only_its_create_answer(
    owner_client: APIClient,
    admin_client_api: APIClient,
    admin_user: User,
    other_user: User,
    caplog: pytest.LogCaptureFixture,
    rendered_logs: io.StringIO,  # noqa: F811 - the imported fixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = [
        owner_client.post("/api/gateway/keys", {"name": "laptop"}, format="json"),
        admin_client_api.post("/api/gateway/keys", {"name": "ci", "owner": "other"}, format="json"),
    ]
    keys = [answer.json()["key"] for answer in created]
    for answer, key in zip(created, keys, strict=True):
        assert answer.content.decode().count(key) == 1
    rows = list(GatewayKey.objects.order_by("pk"))
    for row in rows:
        GatewayUsageFactory.create(key=row)
    bodies: list[str] = []
    admin_site = Client()
    admin_site.force_login(admin_user)
    for client in (owner_client, admin_client_api):
        for row in rows:
            bodies.append(client.get(f"/api/gateway/keys/{row.pk}").content.decode())
            bodies.append(
                client.patch(
                    f"/api/gateway/keys/{row.pk}", {"daily_tokens": 5}, format="json"
                ).content.decode()
            )
        for url in ("/api/gateway/keys", "/api/gateway/usage", "/api/gateway/streams"):
            bodies.append(client.get(url).content.decode())
    # A duplicate name: the refusal names the name, never a key.
    bodies.append(
        owner_client.post("/api/gateway/keys", {"name": "laptop"}, format="json").content.decode()
    )
    for url in (
        "/admin/gateway/gatewaykey/",
        f"/admin/gateway/gatewaykey/{rows[0].pk}/change/",
        "/admin/gateway/gatewayusage/",
        "/admin/gateway/gatewaysession/",
    ):
        page = admin_site.get(url)
        assert page.status_code == 200, url
        bodies.append(page.content.decode())
    for row in rows:
        bodies.append(owner_client.delete(f"/api/gateway/keys/{row.pk}").content.decode())
        bodies.append(admin_client_api.delete(f"/api/gateway/keys/{row.pk}").content.decode())

    logging.getLogger("gateway.canary").warning("a careless line: x-api-key %s", keys[0])
    raw = [r.getMessage() for r in caplog.records if r.name != "gateway.canary"]
    assert "a careless line: x-api-key [redacted]" in rendered_logs.getvalue()
    stored = " ".join(str(v) for row in GatewayKey.objects.values() for v in row.values())
    for key, row in zip(keys, rows, strict=True):
        assert not [body for body in bodies if key in body]
        assert not [message for message in raw if key in message]
        assert key not in rendered_logs.getvalue()
        assert key not in stored
        # The digest is not the key, but no answer needs it either.
        assert not [body for body in bodies if row.digest in body]
