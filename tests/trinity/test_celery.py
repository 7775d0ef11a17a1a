from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from subscriptions.models import RateLimitEvent
from subscriptions.tasks import cleanup_old_rate_limit_events
from tests.subscriptions.factories import RateLimitEventFactory
from trinity.celery import app


def test_every_beat_entry_is_a_registered_task() -> None:
    app.loader.import_default_modules()
    schedule = app.conf.beat_schedule
    assert schedule, "the beat schedule is empty"
    for entry_name, entry in schedule.items():
        assert entry["task"] in app.tasks, f"{entry_name} names unregistered {entry['task']}"
        assert entry["options"]["expires"] <= entry["schedule"], entry_name


def test_cleanup_runs_hourly_under_its_stable_name() -> None:
    entry = app.conf.beat_schedule["cleanup-old-rate-limit-events"]
    assert entry["task"] == "subscriptions.cleanup_old_rate_limit_events"
    assert entry["schedule"] == 3600
    task = app.tasks["subscriptions.cleanup_old_rate_limit_events"]
    assert task.time_limit and task.soft_time_limit


@pytest.mark.django_db
def test_cleanup_task_deletes_expired_events() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    RateLimitEventFactory.create(occurred_at=now - timedelta(hours=25))
    keep = RateLimitEventFactory.create(occurred_at=now - timedelta(hours=1))
    with time_machine.travel(now, tick=False):
        assert cleanup_old_rate_limit_events.apply().get() == 1
    assert list(RateLimitEvent.objects.values_list("pk", flat=True)) == [keep.pk]
