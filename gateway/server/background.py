"""A gateway process's work between requests: re-reading changed keys and deactivated
owners (a revoked key's, or a deactivated owner's, open requests end within a poll)
and publishing its open requests for the panel."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from django.conf import settings

from gateway.open_streams import StreamBook
from gateway.server.keybook import KeyBook, read_poll

logger = logging.getLogger("gateway")

STREAMS_PUBLISH_SECONDS: Final = 1.0


class Background:
    """The key poll and the open requests' publication (only with Redis)."""

    def __init__(
        self,
        *,
        keys: KeyBook,
        streams: StreamBook,
        redis: Any | None,
        pool: Callable[..., Awaitable[Any]],
        on_revoked: Callable[[int, str], None],
    ) -> None:
        self.keys, self.streams, self.redis = keys, streams, redis
        self.pool, self.on_revoked = pool, on_revoked
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self.poll()
        self._tasks.append(asyncio.create_task(self._poll_forever()))
        if self.redis is not None:
            self._tasks.append(asyncio.create_task(self._publish_forever()))

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def poll(self) -> None:
        """Take every key changed since the last poll and which keys' owners are
        deactivated; end a revoked key's requests, and a deactivated owner's."""
        changed, newest, owner_inactive = await self.pool(read_poll, self.keys.since)
        self.keys.apply(changed, newest, self.on_revoked)
        self.keys.apply_owner_inactive(owner_inactive, self.on_revoked)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(settings.TRINITY_GATEWAY_POLL_SECONDS)
            try:
                await self.poll()
            except Exception:
                logger.warning("gateway: key poll failed", exc_info=True)

    async def _publish_forever(self) -> None:
        while True:
            try:
                await self.streams.publish(self.redis)
            except Exception:
                logger.warning("gateway: publishing open streams failed", exc_info=True)
            await asyncio.sleep(STREAMS_PUBLISH_SECONDS)
