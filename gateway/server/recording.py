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

from django.db import IntegrityError, connection, transaction

from gateway.models import GatewayKey, GatewayUsage
from subscriptions.headroom.feed import headroom_reading_observe
from subscriptions.key_spend import fleet_key_spend_add
from trinity import clock

logger = logging.getLogger(__name__)

FLUSH_SECONDS: Final = 0.25
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
    try:
        with transaction.atomic():
            _insert(fields)
    except IntegrityError:
        keys = {row["key_id"] for row in fields}
        kept = set(GatewayKey.objects.filter(pk__in=keys).values_list("pk", flat=True))
        _insert([row for row in fields if row["key_id"] in kept])


def _insert(fields: list[dict[str, Any]]) -> None:
    """On Postgres, one COPY: psycopg writes the rows in C, while the ORM's bulk insert
    spent long enough in Python, holding the interpreter, to stall the event loop's
    requests for tens of milliseconds each flush. Elsewhere (the embedded SQLite), the
    ORM."""
    if not fields:
        return
    if connection.vendor != "postgresql":
        GatewayUsage.objects.bulk_create([GatewayUsage(**row) for row in fields], batch_size=BATCH)
        return
    names = list(fields[0])
    columns = ", ".join(_column(name) for name in names)
    table = GatewayUsage._meta.db_table
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:  # noqa: S608
            for row in fields:
                copy.write_row([row[name] for name in names])


def _column(attname: str) -> str:
    """The quoted column of one of GatewayUsage's fields, by its attribute name."""
    field = next(f for f in GatewayUsage._meta.concrete_fields if f.attname == attname)
    return connection.ops.quote_name(field.column)


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
