"""One poller per event loop for every open stream of the process (ASGI).

A stream waiting for its turn's next event registers here; the poller reads the heads
of every watched turn in one ``get_many`` each ``POLL_SECONDS`` and wakes the streams
whose turn published past what they sent. A hundred open streams cost one cache
round trip per period, not a hundred, and no thread while they wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.db import close_old_connections

from execution.live.events import head_key

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.2


@dataclass(eq=False)
class _Waiter:
    execution_id: str
    after: int
    woken: asyncio.Event = field(default_factory=asyncio.Event)


def _heads(keys: list[str]) -> dict[str, object]:
    try:
        return cache.get_many(keys)
    finally:
        # The embedded database cache opens a connection in the poller's thread.
        close_old_connections()


class Hub:
    def __init__(self) -> None:
        self._waiters: set[_Waiter] = set()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, execution_id: str, after: int, *, timeout: float) -> bool:
        """Wait until the turn published an event past ``after`` (True) or ``timeout``
        passed (False)."""
        waiter = _Waiter(execution_id, after)
        self._waiters.add(waiter)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await waiter.woken.wait()
            return waiter.woken.is_set()
        finally:
            self._waiters.discard(waiter)

    async def _poll(self) -> None:
        read = sync_to_async(_heads, thread_sensitive=False)
        while self._waiters:
            waiters = list(self._waiters)
            keys = sorted({head_key(w.execution_id) for w in waiters})
            try:
                heads = await read(keys)
            except Exception:  # noqa: BLE001 - streams fall back to reading the row
                logger.warning("live turns: could not read the turns' heads", exc_info=True)
                heads = {}
            for waiter in waiters:
                head = heads.get(head_key(waiter.execution_id))
                if isinstance(head, int) and head > waiter.after:
                    waiter.woken.set()
            await asyncio.sleep(POLL_SECONDS)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub_for_loop() -> Hub:
    """The running loop's hub (a uvicorn worker has one loop)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = Hub()
    return hub
