"""The read-state migration, run on rows written before it: a notice marked read (for
everyone, as read state was then) stays read for each user who sees it, at the instant
it was marked, so nobody's badge changes at the upgrade; an unread notice is unread for
all. Backwards, a notice read by anyone is read again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.apps.registry import Apps

from tests.migrations import migrate, migrated
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("agents", "0008_alter_agent_runtime"), ("trinity", "0008_openai_platform_key")]
AFTER = [("trinity", "0009_notification_read_per_user")]
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def before() -> Iterator[Apps]:
    with migrated(BEFORE) as apps:
        yield apps


def test_a_read_notice_stays_read_for_each_user_who_sees_it(before: Apps) -> None:
    apps = before
    User = apps.get_model("auth", "User")
    Agent = apps.get_model("agents", "Agent")
    Notification = apps.get_model("trinity", "Notification")
    admin = User.objects.create(username="admin", is_staff=True)
    owner = User.objects.create(username="owner")
    other = User.objects.create(username="other")
    bot = Agent.objects.create(name="bot", owner=owner, shared_secret=Secret("s"))
    read_at = T0 + timedelta(minutes=5)
    ids = {
        title: Notification.objects.create(
            kind="k", title=title, created_at=T0, read_at=read_at if read else None, **fields
        ).pk
        for title, read, fields in (
            ("owners-agent", True, {"agent": bot, "agent_name": "bot"}),
            ("shared-alert", True, {"subscription_id": 7}),
            ("deleted-agent", True, {"agent_name": "gone"}),
            ("fleet", True, {}),
            ("unread", False, {"agent": bot, "agent_name": "bot"}),
        )
    }

    apps = migrate(AFTER)
    NotificationRead = apps.get_model("trinity", "NotificationRead")
    readers = {
        title: set(
            NotificationRead.objects.filter(notification_id=pk).values_list(
                "user__username", flat=True
            )
        )
        for title, pk in ids.items()
    }
    assert readers == {
        "owners-agent": {"admin", "owner"},
        "shared-alert": {"admin", "owner", "other"},
        "deleted-agent": {"admin"},
        "fleet": {"admin"},
        "unread": set(),
    }
    assert set(NotificationRead.objects.values_list("read_at", flat=True)) == {read_at}
    assert {admin.pk, owner.pk, other.pk} == set(User.objects.values_list("pk", flat=True))

    apps = migrate(BEFORE)
    Notification = apps.get_model("trinity", "Notification")
    back = dict(Notification.objects.values_list("title", "read_at"))
    assert back == {
        "owners-agent": read_at,
        "shared-alert": read_at,
        "deleted-agent": read_at,
        "fleet": read_at,
        "unread": None,
    }
