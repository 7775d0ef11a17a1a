from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable
from unittest import mock

import factory
import redis.asyncio
from django.conf import settings

from gateway import open_streams
from gateway.keys import KEY_PREFIX, SHOWN_CHARS, key_digest
from gateway.models import GatewayKey, GatewayUsage
from gateway.open_streams import OpenStream, StreamBook
from tests.agents.factories import UserFactory
from trinity import clock


def gateway_key() -> str:
    """A key of the shape ``gateway.keys`` issues."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class GatewayKeyFactory(factory.django.DjangoModelFactory[GatewayKey]):
    """A stored key; ``secret`` (a factory parameter) is the key its digest is of."""

    class Meta:
        model = GatewayKey

    class Params:
        secret = factory.LazyFunction(gateway_key)

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"key-{n}")
    prefix = factory.LazyAttribute(
        lambda o: o.secret[len(KEY_PREFIX) : len(KEY_PREFIX) + SHOWN_CHARS]
    )
    digest = factory.LazyAttribute(lambda o: key_digest(o.secret))
    created_by = factory.SelfAttribute("owner")
    created_at = factory.LazyFunction(clock.now)
    updated_at = factory.SelfAttribute("created_at")


class GatewayUsageFactory(factory.django.DjangoModelFactory[GatewayUsage]):
    """One served request of the key's owner on a plan."""

    class Meta:
        model = GatewayUsage

    key = factory.SubFactory(GatewayKeyFactory)
    owner = factory.SelfAttribute("key.owner")
    at = factory.LazyFunction(clock.now)
    provider = "anthropic"
    path = "/v1/messages"
    model = "claude-sonnet-4-5"
    status = 200
    served_by_kind = "subscription"
    served_by_name = "plan-a"


def open_streams_publish(streams: Iterable[OpenStream], *, process: str, ttl: int = 300) -> None:
    """Publish ``streams`` to Redis as a gateway process named ``process`` does
    (``StreamBook.publish``), kept ``ttl`` seconds: a test outlives the gateway's few
    (each test's end empties the Redis db anyway)."""
    book = StreamBook()
    book.name = open_streams.PREFIX + process
    for stream in streams:
        book.add(stream)

    async def publish() -> None:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        try:
            await book.publish(client)
        finally:
            await client.aclose()

    with mock.patch.object(open_streams, "TTL_SECONDS", ttl):
        asyncio.run(publish())
