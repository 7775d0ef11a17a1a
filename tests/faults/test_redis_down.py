"""Redis goes down in the middle of a walk, and comes back.

Real parts: a Redis server of this test's own under the platform's cache (snapshots,
refusal marks, notification dedup), really stopped while the first attempt is in
flight and started again; the agent server with the real Claude Code CLI; the
simulator; the test database. The turn runs in this process (the web path's code),
so the outage hits exactly the cache calls a web process would make.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.headroom.store import snapshots_write, turn_evidence_read
from subscriptions.models import RateLimitEvent, Subscription
from tests.faults.harness import (
    RedisServer,
    agent_on,
    cli_child,
    messages_sent,
    redis_cache,
    register_plan,
    task,
    throwaway_redis,
    turn_in_background,
    wait_until,
)
from tests.headroom.readings import reading
from trinity import clock
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with throwaway_redis() as server, redis_cache(server.url):
        yield server


def headroom(roomy: Subscription, tight: Subscription) -> bool:
    """Fresh readings as the sampler would leave them: ``roomy`` nearly empty, ``tight``
    nearly full. The ranking picks ``roomy``; the database order picks plan-b."""
    now = clock.now()
    return snapshots_write(
        {
            roomy.pk: reading(five_hour=5, seven_day=5, now=now),
            tight.pk: reading(five_hour=90, seven_day=90, now=now),
        }
    )


def test_redis_down_mid_walk_serves_the_turn_in_db_order_and_recovers(
    redis: RedisServer, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, b_token = register_plan(control, "plan-b")
    c, _ = register_plan(control, "plan-c")
    agent = agent_on(owner, a)
    assert headroom(roomy=c, tight=b)
    # plan-a reads as roomy as plan-c, so placement has nothing better to start on.
    assert snapshots_write({a.pk: reading(five_hour=5, seven_day=5, now=clock.now())})
    assert task(owner_client)["http_status"] == 200  # the server is up
    agent.refresh_from_db()
    control.set_usage(a_token, "five_hour", percent=100)
    control.clear_requests()
    control.set_latency(3_000)  # the first attempt is in flight when Redis goes

    thread, body = turn_in_background(owner_client)
    cli_child(agent)
    redis.stop()
    thread.join(timeout=90)
    control.set_latency(0)

    assert body["http_status"] == 200, body
    # Ranking fell back to the database order (plan-b before plan-c by name).
    assert body["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 200)]
    switch = body["subscription_switch"]
    assert switch["committed"] and switch["why"]["fallback"] == "store_unreachable", switch
    # The refusal is recorded in the database (its cache mark was lost, safely) and the
    # operator is told once, deduplicated on the database.
    assert RateLimitEvent.objects.get().subscription_id == a.pk
    assert Notification.objects.filter(kind="subscription_switched").count() == 1
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk
    # Still down: the pre-dispatch read finds nothing and the turn runs as assigned.
    control.clear_requests()
    assert task(owner_client)["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    assert messages_sent(control) == [("plan-b", 200)]

    # Redis returns, empty (it persisted nothing): the next sweep refills it, and the
    # next walk ranks by headroom again and leaves its refusal mark.
    redis.start()
    wait_until(lambda: headroom(roomy=c, tight=a), seconds=10, what="the cache to reconnect")
    control.set_usage(b_token, "five_hour", percent=100)
    control.clear_requests()
    walked = task(owner_client)

    assert walked["http_status"] == 200, walked
    assert walked["served_by_subscription"] == {"id": c.pk, "name": "plan-c"}
    assert messages_sent(control) == [("plan-b", 429), ("plan-c", 200)]
    assert walked["subscription_switch"]["why"].get("fallback") is None
    evidence = turn_evidence_read(b.pk)
    assert evidence.reachable and evidence.refusal is not None
    assert Notification.objects.filter(kind="subscription_switched").count() == 2
