from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from trinity.models import Notification
from trinity.notifications import notification_send

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db

# A real Redis client pointed at a port where nothing listens: a genuine outage.
UNREACHABLE_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:9/0",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
    }
}


def test_the_same_key_fires_once_within_its_ttl() -> None:
    first = notification_send(kind="switch", title="switched", now=NOW, dedup_key="k", dedup_ttl=60)
    second = notification_send(
        kind="switch", title="switched", now=NOW, dedup_key="k", dedup_ttl=60
    )
    other = notification_send(
        kind="switch", title="switched", now=NOW, dedup_key="k2", dedup_ttl=60
    )
    assert first is not None and other is not None
    assert second is None
    assert Notification.objects.count() == 2


def test_with_the_cache_down_dedup_falls_back_to_the_database() -> None:
    with override_settings(CACHES=UNREACHABLE_REDIS):
        assert notification_send(kind="k", title="t", now=NOW, dedup_key="x", dedup_ttl=60)
        assert notification_send(kind="k", title="t", now=NOW, dedup_key="x", dedup_ttl=60) is None
        later = NOW + timedelta(seconds=61)
        assert notification_send(kind="k", title="t", now=later, dedup_key="x", dedup_ttl=60)


def test_titles_and_bodies_are_redacted() -> None:
    token = "sk-ant-oat01-" + "Z" * 40
    note = notification_send(kind="k", title=f"bad {token}", body=f"body {token}", now=NOW)
    assert note is not None
    assert token not in note.title and token not in note.body
