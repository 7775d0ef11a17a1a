"""GET /api/audit (admins only, newest first by cursor, filtered) and its JSON-lines
export."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from trinity import clock
from trinity.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def entries() -> list[AuditEntry]:
    now = clock.now()
    rows = [
        ("alice", "agent.update", "agent", "1", now - timedelta(hours=3)),
        ("bob", "agent.delete", "agent", "2", now - timedelta(hours=2)),
        ("alice", "subscription.create", "subscription", "7", now - timedelta(hours=1)),
    ]
    return [
        AuditEntry.objects.create(
            actor_kind="user",
            actor_username=who,
            source="panel",
            action=action,
            object_type=kind,
            object_id=ident,
            created_at=at,
        )
        for who, action, kind, ident, at in rows
    ]


def _actions(client: APIClient, query: dict[str, str]) -> list[str]:
    response = client.get("/api/audit", query)
    assert response.status_code == 200, response.content
    return [row["action"] for row in response.json()["results"]]


def test_only_an_admin_reads_the_log(
    entries: list[AuditEntry],
    admin_client_api: APIClient,
    owner_client: APIClient,
    anon_client: APIClient,
) -> None:
    assert owner_client.get("/api/audit").status_code == 403
    assert anon_client.get("/api/audit").status_code in (401, 403)
    assert owner_client.get("/api/audit/export").status_code == 403
    assert admin_client_api.get("/api/audit").status_code == 200


def test_the_filters_cut_by_actor_object_action_and_time(
    entries: list[AuditEntry], admin_client_api: APIClient
) -> None:
    # The admin's own sign-in (force_login) is an entry too: filtered out by actor here.
    assert _actions(admin_client_api, {"actor": "alice"}) == ["subscription.create", "agent.update"]
    assert _actions(admin_client_api, {"object_type": "agent", "object_id": "2"}) == [
        "agent.delete"
    ]
    assert _actions(admin_client_api, {"action": "agent.update"}) == ["agent.update"]
    since = (clock.now() - timedelta(minutes=150)).isoformat()
    until = (clock.now() - timedelta(minutes=30)).isoformat()
    assert _actions(admin_client_api, {"since": since, "until": until}) == [
        "subscription.create",
        "agent.delete",
    ]
    assert admin_client_api.get("/api/audit", {"since": "yesterday"}).status_code == 400
    refused = admin_client_api.get("/api/audit/export", {"object_type": "a\x00b"})
    assert (refused.status_code, list(refused.json())) == (400, ["object_type"])


def test_pages_follow_the_cursor_newest_first(
    entries: list[AuditEntry], admin_client_api: APIClient
) -> None:
    first = admin_client_api.get("/api/audit", {"object_type": "agent", "limit": "1"}).json()
    assert [r["action"] for r in first["results"]] == ["agent.delete"]
    second = admin_client_api.get(first["next"]).json()
    assert [r["action"] for r in second["results"]] == ["agent.update"]
    assert second["next"] is None


def test_the_export_is_json_lines_oldest_first_with_the_same_filters(
    entries: list[AuditEntry], admin_client_api: APIClient
) -> None:
    response = admin_client_api.get("/api/audit/export", {"actor": "alice"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = b"".join(response.streaming_content).decode().splitlines()  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in lines]
    assert [r["action"] for r in rows] == ["agent.update", "subscription.create"]
    assert rows[0]["actor_username"] == "alice" and "changes" in rows[0]
