"""The open requests the panel lists: each gateway process publishes its own to Redis,
the web reads every process's, and a process that stops publishing drops out."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio
from django.conf import settings

from gateway.open_streams import TTL_SECONDS, OpenStream, StreamBook, open_streams_read


def stream(request_id: str, at: str) -> OpenStream:
    return OpenStream(request_id, 1, 7, "anthropic", "claude-sonnet-5-5", at, "")


def test_every_processs_open_streams_are_read_oldest_first_and_expire() -> None:
    if not settings.REDIS_URL:
        pytest.fail("the open streams are published to Redis")
    first, second = StreamBook(), StreamBook()
    second.name += ":other"
    first.add(stream("b", "2026-12-05T10:00:02+00:00"))
    second.add(stream("a", "2026-12-05T10:00:01+00:00"))
    first.add(stream("gone", "2026-12-05T10:00:03+00:00"))
    first.remove("gone")
    first.served("b", "max-a")

    async def publish() -> None:
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        await first.publish(client)
        await second.publish(client)
        await client.aclose()

    asyncio.run(publish())
    reader = redis.Redis.from_url(settings.REDIS_URL)
    listed = open_streams_read(reader)
    assert [(s.request_id, s.served_by) for s in listed] == [("a", ""), ("b", "max-a")]
    assert 0 < reader.ttl(first.name) <= TTL_SECONDS
