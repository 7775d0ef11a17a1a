"""What the gateway writes after a request has been answered, off the request's path:
usage rows in batches, the latest rate-limit reading per plan, the key's fleet spend.

A client's next request on a kept-alive connection waits for the previous handler to
return, so nothing here is awaited by a request: each write is queued and a
background task flushes the queue every ``FLUSH_SECONDS`` in the thread pool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from django.db import IntegrityError, transaction

from gateway.models import GatewayKey, GatewayUsage
from subscriptions.headroom.feed import headroom_reading_observe
from subscriptions.key_spend import fleet_key_spend_add
from trinity import clock

logger = logging.getLogger(__name__)

FLUSH_SECONDS: Final = 0.5
# Rows written per INSERT at most.
BATCH: Final = 500

Pool = Callable[..., Awaitable[Any]]


class Recorder:
    """Queues of what to write, and the task that writes them."""

    def __init__(self, pool: Pool, also: Callable[[], Awaitable[None]]) -> None:
        self.pool = pool
        # Flushed with the rest: the keys' limits' counts (``gateway/limits.py``).
        self.also = also
        # Each request's GatewayUsage fields (the rows are made in the thread pool).
        self.usage: list[dict[str, Any]] = []
        # subscription id -> (the latest answer's rate-limit headers, when it came)
        self.readings: dict[int, tuple[dict[str, str], datetime]] = {}
        # provider -> the platform key's metered spend not yet in its fleet ledger
        self.key_spend: dict[str, Decimal] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()

    def reading(self, subscription_id: int, headers: dict[str, str], at: datetime) -> None:
        """Every proxied answer of a plan is a reading; the latest one per plan wins."""
        self.readings[subscription_id] = (headers, at)

    def spend(self, provider: str, usd: Decimal) -> None:
        if usd > 0:
            self.key_spend[provider] = self.key_spend.get(provider, Decimal(0)) + usd

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                await self.flush()
            except Exception:  # a lost batch must not stop the next ones
                logger.exception("gateway: writing usage failed")

    async def flush(self) -> None:
        try:
            await self.also()
        except Exception:  # the keys' counts wait for Redis; usage rows must not
            logger.warning("gateway: counting the keys' use failed", exc_info=True)
        rows, self.usage = self.usage, []
        readings, self.readings = self.readings, {}
        spend, self.key_spend = self.key_spend, {}
        if rows or readings or spend:
            await self.pool(_write, rows, readings, spend)


def _usage_write(fields: list[dict[str, Any]]) -> None:
    """Insert the rows in one statement; when a row's key was deleted meanwhile (its
    owner removed), only that key's rows are lost."""
    rows = [GatewayUsage(**row) for row in fields]
    try:
        with transaction.atomic():
            GatewayUsage.objects.bulk_create(rows, batch_size=BATCH)
    except IntegrityError:
        kept = set(
            GatewayKey.objects.filter(pk__in={r.key_id for r in rows}).values_list("pk", flat=True)
        )
        GatewayUsage.objects.bulk_create([r for r in rows if r.key_id in kept], batch_size=BATCH)


def _write(
    rows: list[dict[str, Any]],
    readings: dict[int, tuple[dict[str, str], datetime]],
    spend: dict[str, Decimal],
) -> None:
    if rows:
        _usage_write(rows)
    for subscription_id, (headers, at) in readings.items():
        headroom_reading_observe(subscription_id=subscription_id, headers=headers, now=at)
    for provider, usd in spend.items():
        fleet_key_spend_add(provider=provider, usd=usd, now=clock.now())
