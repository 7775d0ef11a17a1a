"""Concurrency leases: the cap holds across processes racing for the last slot, a dead
holder's lease expires by itself, and an unreachable store enforces nothing."""

from __future__ import annotations

import logging
import multiprocessing
import os
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import override_settings
from django_redis import get_redis_connection

from subscriptions import leases
from subscriptions.leases import (
    at_capacity,
    lease_acquire,
    lease_release,
    leases_live,
    subscriptions_at_capacity,
)
from trinity import clock

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
ON_REDIS = bool(os.environ.get("REDIS_URL"))
needs_redis = pytest.mark.skipif(not ON_REDIS, reason="needs a real Redis: set REDIS_URL")
UNREACHABLE_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:9/0",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
    }
}


@pytest.mark.parametrize(
    ("caps", "live", "expected"),
    [
        ({1: 1}, {}, set()),  # nothing running
        ({1: 1}, {1: 1}, {1}),  # exactly the cap
        ({1: 2}, {1: 1}, set()),  # one below
        ({1: 2}, {1: 3}, {1}),  # above (a cap lowered under running turns)
        ({1: 1, 2: 3}, {1: 0, 2: 3, 9: 5}, {2}),  # 9 has no cap: never at one
    ],
)
def test_a_subscription_is_at_capacity_from_its_cap_on(
    caps: dict[int, int], live: dict[int, int], expected: set[int]
) -> None:
    assert at_capacity(caps, live) == expected


def take(holder: str, *, cap: int = 1, now: datetime = T0, ttl: float = 60) -> bool | None:
    return lease_acquire(
        subscription_id=7, holder=holder, cap=cap, expires_at=now + timedelta(seconds=ttl), now=now
    )


@pytest.mark.redis
@needs_redis
def test_a_subscription_serves_its_cap_and_a_release_frees_a_slot() -> None:
    assert take("e1", cap=2) is True
    assert take("e2", cap=2) is True
    assert take("e3", cap=2) is False
    assert take("e1", cap=2) is True  # its own lease, renewed: not a second slot
    assert leases_live([7, 8], now=T0) == {7: 2, 8: 0}
    assert subscriptions_at_capacity({7: 2, 8: 1}, now=T0) == {7}

    lease_release(subscription_id=7, holder="e2")

    assert take("e3", cap=2) is True
    assert leases_live([7], now=T0) == {7: 2}


@pytest.mark.redis
@needs_redis
def test_a_dead_holders_lease_expires_at_its_deadline() -> None:
    with time_machine.travel(T0, tick=False) as traveller:
        # A worker takes a lease until its attempt's deadline and dies: no release.
        assert take("dead", now=clock.now(), ttl=10) is True
        traveller.shift(timedelta(seconds=9))
        assert take("next", now=clock.now()) is False
        assert subscriptions_at_capacity({7: 1}, now=clock.now()) == {7}
        traveller.shift(timedelta(seconds=1))  # exactly its expiry: over
        assert subscriptions_at_capacity({7: 1}, now=clock.now()) == set()
        assert take("next", now=clock.now()) is True


PROCESSES = 8
ROUNDS = 150
CAP = 3


def _contend(process: int, barrier: multiprocessing.synchronize.Barrier, results: object) -> None:
    """One process taking and giving back leases on subscription 7 as fast as it can;
    ``inside`` counts the holders between acquire and release (a shared Redis counter)."""
    redis = get_redis_connection("default")  # a forked pool reconnects: its own client
    inside, taken, refused, most = "test:inside", 0, 0, 0
    barrier.wait()
    for i in range(ROUNDS):
        holder = f"p{process}-{i}"
        if take(holder, cap=CAP):
            taken += 1
            most = max(most, int(redis.incr(inside)))
            redis.decr(inside)
            lease_release(subscription_id=7, holder=holder)
        else:
            refused += 1
    results.put((taken, refused, most))  # type: ignore[attr-defined]


@pytest.mark.redis
@needs_redis
def test_processes_racing_for_the_last_slot_never_exceed_the_cap() -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=_contend, args=(n, barrier, results)) for n in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0

    assert max(most for _, _, most in outcomes) <= CAP
    assert sum(taken for taken, _, _ in outcomes) > 0
    # The race was real: some acquisitions met a full subscription.
    assert sum(refused for _, refused, _ in outcomes) > 0
    assert leases_live([7], now=T0) == {7: 0}


@pytest.mark.django_db
def test_an_unreachable_store_enforces_no_cap_and_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases._outage, "logged", False)
    with override_settings(CACHES=UNREACHABLE_REDIS), caplog.at_level(logging.WARNING):
        assert take("e1") is None
        assert leases_live([7], now=T0) is None
        assert subscriptions_at_capacity({7: 1}, now=T0) == set()
        lease_release(subscription_id=7, holder="e1")
    warnings = [r for r in caplog.records if "lease store unreachable" in r.getMessage()]
    assert len(warnings) == 1
