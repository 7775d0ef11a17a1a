"""A key's limits, on Redis (the script every gateway process shares) and in memory
(the embedded default's one process): the same table of cases for both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
import redis.asyncio
from django.conf import settings

from gateway.limits import KeyLimits, Limits, MemoryLimits, RedisLimits, periods

T = TypeVar("T")
NOW = datetime(2026, 12, 5, 23, 59, 30, tzinfo=UTC)


class Harness:
    """One implementation of the limits, driven on one event loop (a Redis client's
    connections belong to the loop that made them)."""

    def __init__(self, make: Callable[[], Limits]) -> None:
        self.loop = asyncio.new_event_loop()
        self.limits = self.run(_made(make))

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def admit(self, caps: KeyLimits, request_id: str, key_id: int = 1) -> str:
        refused = self.run(
            self.limits.admit(key_id=key_id, limits=caps, request_id=request_id, now=NOW)
        )
        return "" if refused is None else f"{refused.limit}:{refused.retry_after}"

    def release(self, request_id: str, tokens: int = 0, usd: float = 0.0) -> None:
        """The request closed and what it used counted (the next flush writes it)."""
        self.run(self.limits.release(key_id=1, request_id=request_id))
        self.limits.add(key_id=1, tokens=tokens, usd=usd, now=NOW)
        self.run(self.limits.flush())


async def _made(make: Callable[[], Limits]) -> Limits:
    return make()


def _redis() -> Limits:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    return RedisLimits(client)


@pytest.fixture(params=["redis", "memory"])
def limits(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "redis" and not settings.REDIS_URL:
        pytest.fail("the limits' Redis script needs Redis")
    harness = Harness(_redis if request.param == "redis" else MemoryLimits)
    if isinstance(harness.limits, RedisLimits):
        harness.run(harness.limits.client.flushdb())
    yield harness
    if isinstance(harness.limits, RedisLimits):
        harness.run(harness.limits.client.flushdb())
        harness.run(harness.limits.client.aclose())
    harness.loop.close()


def test_no_limit_admits_everything(limits: Harness) -> None:
    assert [limits.admit(KeyLimits(), f"r{i}") for i in range(5)] == [""] * 5


def test_requests_per_minute_refuse_until_the_minute_ends(limits: Harness) -> None:
    caps = KeyLimits(requests_per_minute=2)
    assert [limits.admit(caps, f"r{i}") for i in range(3)] == ["", "", "requests_per_minute:30"]


def test_streams_are_counted_while_open_and_freed_by_release(limits: Harness) -> None:
    caps = KeyLimits(max_streams=1)
    assert limits.admit(caps, "a") == ""
    assert limits.admit(caps, "b") == "max_streams:1"
    assert limits.admit(caps, "c", key_id=2) == ""  # another key's streams are its own
    limits.release("a")
    assert limits.admit(caps, "d") == ""


@pytest.mark.parametrize(
    ("caps", "tokens", "usd", "refused"),
    [
        (KeyLimits(daily_tokens=100), 99, 0.0, ""),
        (KeyLimits(daily_tokens=100), 100, 0.0, "daily_tokens:30"),  # the cap reached
        (KeyLimits(monthly_tokens=100), 150, 0.0, "monthly_tokens:30"),
        (KeyLimits(daily_usd=0.5), 0, 0.49, ""),
        (KeyLimits(daily_usd=0.5), 0, 0.5, "daily_usd:30"),
        (KeyLimits(monthly_usd=0.5), 0, 0.75, "monthly_usd:30"),
    ],
)
def test_caps_refuse_once_what_was_used_reaches_them_until_the_period_ends(
    limits: Harness, caps: KeyLimits, tokens: int, usd: float, refused: str
) -> None:
    assert limits.admit(caps, "first") == ""
    limits.release("first", tokens=tokens, usd=usd)
    # 23:59:30 on December 5th: a day's cap reopens in 30 s, a month's on January 1st.
    if refused.startswith("monthly"):
        _, _, _, month_left = periods(NOW)
        refused = refused.replace(":30", f":{month_left}")
    assert limits.admit(caps, "second") == refused


def test_a_key_without_limits_costs_no_round_trip_but_its_use_still_counts(
    limits: Harness,
) -> None:
    assert limits.admit(KeyLimits(), "free") == ""
    limits.release("free", tokens=500)
    # A cap set later counts what the key used today before it.
    assert limits.admit(KeyLimits(daily_tokens=100), "capped") == "daily_tokens:30"


def test_periods_end_at_utc_midnight_and_the_first_of_the_month() -> None:
    day, month, day_left, month_left = periods(NOW)
    assert (day, month, day_left) == ("20261205", "202612", 30)
    assert month_left == 26 * 86400 + 30
