"""The week plan in the cache: round trips, freshness, outages that never raise."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings

from agents.week_plan_store import (
    ENTRY_TTL_SECONDS,
    LAST_KEY,
    planned_key,
    planned_read,
    planned_read_many,
    week_plan_read,
    week_plan_store,
)
from routing.plan_ahead.week_plan import STALE_AFTER
from subscriptions import week_planning
from tests.headroom.readings import T0
from tests.headroom.test_store import ON_REDIS, UNREACHABLE_REDIS
from tests.week_plan.factories import planned, week_plan

pytestmark = pytest.mark.django_db


def test_the_plan_and_each_entry_round_trip() -> None:
    plan = week_plan(planned(1), planned(2, subscription_id=None, name=""))

    assert week_plan_store(plan)

    assert week_plan_read() == plan
    assert planned_read(1) == plan.placements[0]
    assert planned_read(2) == plan.placements[1]
    assert planned_read(3) is None
    assert planned_read_many([1, 2, 3]) == {1: plan.placements[0], 2: plan.placements[1]}
    # The turn's gatherers read through subscriptions.week_planning: the same store.
    assert week_planning.planned_read(1) == plan.placements[0]


def test_an_entry_is_current_until_it_is_stale_or_over() -> None:
    entry = planned(1, until=timedelta(hours=2))
    week_plan_store(week_plan(entry))
    read = planned_read(1)

    assert read is not None
    assert read.current(T0 + STALE_AFTER)
    assert not read.current(T0 + STALE_AFTER + timedelta(seconds=1))
    assert not planned(1, until=timedelta(minutes=10)).current(T0 + timedelta(minutes=10))


@pytest.mark.skipif(not ON_REDIS, reason="TTLs are read from Redis")
def test_entries_expire_with_the_plans_freshness() -> None:
    week_plan_store(week_plan(planned(1)))

    assert ENTRY_TTL_SECONDS == STALE_AFTER.total_seconds()
    entry_ttl = cache.ttl(planned_key(1))  # type: ignore[attr-defined]
    assert ENTRY_TTL_SECONDS - 5 <= entry_ttl <= ENTRY_TTL_SECONDS
    assert cache.ttl(LAST_KEY) > ENTRY_TTL_SECONDS  # type: ignore[attr-defined]


def test_a_new_plan_drops_the_entries_of_agents_it_no_longer_places() -> None:
    week_plan_store(week_plan(planned(1), planned(2)))

    week_plan_store(week_plan(planned(2, name="max-c"), made_at=T0 + timedelta(minutes=5)))

    assert planned_read(1) is None
    entry = planned_read(2)
    assert entry is not None and entry.name == "max-c"


def test_a_malformed_or_misfiled_entry_reads_as_none() -> None:
    cache.set(planned_key(1), {"agent_id": 1, "kind": "plan"})
    cache.set(planned_key(2), planned(3).to_json())
    cache.set(LAST_KEY, {"made_at": "yesterday"})

    assert planned_read(1) is None
    assert planned_read(2) is None
    assert planned_read_many([1, 2]) == {}
    assert week_plan_read() is None


def test_an_unreachable_cache_reads_none_and_stores_nothing() -> None:
    with override_settings(CACHES=UNREACHABLE_REDIS):
        assert planned_read(1) is None
        assert planned_read_many([1, 2]) == {}
        assert week_plan_read() is None
        assert week_plan_store(week_plan(planned(1))) is False
