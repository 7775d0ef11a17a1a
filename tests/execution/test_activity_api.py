from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory
from trinity.notifications import notification_send

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture
def notes(owner: User) -> dict[str, int]:
    mine = SubscriptionFactory.create(name="mine")
    AgentFactory.create(name="my-bot", owner=owner, subscription=mine)
    AgentFactory.create(name="their-bot")
    ids = {}
    for key, kwargs in {
        "agent": {"agent_name": "my-bot"},
        "subscription": {"subscription_id": mine.pk, "level": "warning"},
        "foreign": {"agent_name": "their-bot"},
        "global": {},
    }.items():
        note = notification_send(kind=f"k-{key}", title=key, now=NOW, **kwargs)  # type: ignore[arg-type]
        assert note is not None
        ids[key] = note.pk
    return ids


def test_admin_sees_every_notification(admin_client_api: APIClient, notes: dict[str, int]) -> None:
    titles = {n["title"] for n in admin_client_api.get("/api/notifications").json()}
    assert titles == {"agent", "subscription", "foreign", "global"}


def test_an_owner_sees_notifications_about_their_agents_and_subscriptions(
    owner_client: APIClient, other_client: APIClient, notes: dict[str, int]
) -> None:
    titles = {n["title"] for n in owner_client.get("/api/notifications").json()}
    assert titles == {"agent", "subscription"}
    assert other_client.get("/api/notifications").json() == []


def test_notifications_filter_by_level_kind_and_agent(
    admin_client_api: APIClient, notes: dict[str, int]
) -> None:
    warning = admin_client_api.get("/api/notifications?level=warning").json()
    assert [n["title"] for n in warning] == ["subscription"]
    assert [
        n["title"] for n in admin_client_api.get("/api/notifications?kind=k-global").json()
    ] == ["global"]
    assert [n["title"] for n in admin_client_api.get("/api/notifications?agent=my-bot").json()] == [
        "agent"
    ]
    assert admin_client_api.get("/api/notifications?level=loud").status_code == 400


def test_anonymous_is_refused(anon_client: APIClient) -> None:
    assert anon_client.get("/api/notifications").status_code in (401, 403)
