"""A gateway key's limits, shared by every gateway process: requests per minute,
concurrent streams, and daily/monthly token and dollar caps; and the open streams.

One Redis script admits a request (``admit``): it checks the caps against what the
key has used this UTC day and month, the open requests against ``max_streams``, counts
the request in its minute and registers it as open, or says which limit refused and
how long until it admits again. ``release`` closes the request and adds what it used.
Redis holds the counts so that every gateway process sees one figure (a process-local
count would let N processes serve N times a limit). The embedded default has no
Redis and runs one gateway process: ``MemoryLimits`` keeps the same counts in memory.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Protocol

# How long an open request's registration outlives a process that died holding it.
LEASE_SECONDS: Final = 15 * 60
# Minute counters the in-memory limits keep before forgetting past minutes.
MAX_MINUTES: Final = 10_000
# The limits, in the order the script checks them, with the words a refusal says.
LIMIT_WORDS: Final = {
    1: ("daily_tokens", "daily token cap"),
    2: ("monthly_tokens", "monthly token cap"),
    3: ("daily_usd", "daily dollar cap"),
    4: ("monthly_usd", "monthly dollar cap"),
    5: ("max_streams", "concurrent stream limit"),
    6: ("requests_per_minute", "requests-per-minute limit"),
}


@dataclass(frozen=True, slots=True)
class KeyLimits:
    """A key's limits (0: off)."""

    requests_per_minute: int = 0
    max_streams: int = 0
    daily_tokens: int = 0
    monthly_tokens: int = 0
    daily_usd: float = 0.0
    monthly_usd: float = 0.0

    @property
    def any(self) -> bool:
        """Whether any limit is on."""
        return self != KeyLimits()


@dataclass(frozen=True, slots=True)
class Refused:
    """Which limit refused (``LIMIT_WORDS``' field name), its words, and in how many
    whole seconds it admits again (at least 1)."""

    limit: str
    words: str
    retry_after: int


def periods(now: datetime) -> tuple[str, str, int, int]:
    """(day, month) labels of ``now`` (UTC) and the seconds until each ends."""
    now = now.astimezone(UTC)
    day_end = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    month_end = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
    return (
        now.strftime("%Y%m%d"),
        now.strftime("%Y%m"),
        max(1, math.ceil((day_end - now).total_seconds())),
        max(1, math.ceil((month_end - now).total_seconds())),
    )


def _minute_left(now: datetime) -> int:
    return max(1, 60 - int(now.timestamp()) % 60)


def _refused(code: int, now: datetime) -> Refused:
    field, words = LIMIT_WORDS[code]
    _, _, day_left, month_left = periods(now)
    retry = {1: day_left, 2: month_left, 3: day_left, 4: month_left, 5: 1}.get(code)
    return Refused(field, words, retry if retry is not None else _minute_left(now))


class Limits(Protocol):
    async def admit(
        self, *, key_id: int, limits: KeyLimits, request_id: str, now: datetime
    ) -> Refused | None: ...

    async def release(self, *, key_id: int, request_id: str) -> None: ...

    def add(self, *, key_id: int, tokens: int, usd: float, now: datetime) -> None: ...

    async def flush(self) -> None: ...


# KEYS: day hash, month hash, open zset, minute counter.
# ARGV: now (s), request id, lease end (s), rpm, streams, day tokens, month tokens,
#       day usd, month usd.
_ADMIT: Final = """
local now = tonumber(ARGV[1])
local function used(key, field)
  return tonumber(redis.call('HGET', key, field) or '0')
end
if tonumber(ARGV[6]) > 0 and used(KEYS[1], 't') >= tonumber(ARGV[6]) then return 1 end
if tonumber(ARGV[7]) > 0 and used(KEYS[2], 't') >= tonumber(ARGV[7]) then return 2 end
if tonumber(ARGV[8]) > 0 and used(KEYS[1], 'u') >= tonumber(ARGV[8]) then return 3 end
if tonumber(ARGV[9]) > 0 and used(KEYS[2], 'u') >= tonumber(ARGV[9]) then return 4 end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if tonumber(ARGV[5]) > 0 and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then
  return 5
end
if tonumber(ARGV[4]) > 0 then
  local count = redis.call('INCR', KEYS[4])
  if count == 1 then redis.call('EXPIRE', KEYS[4], 61) end
  if count > tonumber(ARGV[4]) then return 6 end
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('EXPIRE', KEYS[3], 3600)
return 0
"""
# How long a day's and a month's counts are kept.
_KEPT: Final = {"d": 2 * 86400, "m": 32 * 86400}


def _keys(key_id: int, now: datetime) -> tuple[str, str, str, str]:
    day, month, _, _ = periods(now)
    minute = int(now.timestamp()) // 60
    return (
        f"gw:used:{key_id}:d:{day}",
        f"gw:used:{key_id}:m:{month}",
        f"gw:open:{key_id}",
        f"gw:rpm:{key_id}:{minute}",
    )


class RedisLimits:
    """The limits on Redis (``redis.asyncio`` client): one script call per request of a
    key with a limit, none for a key without; what keys used, one pipeline per flush."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._admit = client.register_script(_ADMIT)
        # (day or month hash) -> [tokens, usd] not written yet
        self._pending: dict[str, list[float]] = {}

    async def admit(
        self, *, key_id: int, limits: KeyLimits, request_id: str, now: datetime
    ) -> Refused | None:
        if not limits.any:
            return None
        day, month, open_key, minute = _keys(key_id, now)
        seconds = now.timestamp()
        code = await self._admit(
            keys=[day, month, open_key, minute],
            args=[
                seconds,
                request_id,
                seconds + LEASE_SECONDS,
                limits.requests_per_minute,
                limits.max_streams,
                limits.daily_tokens,
                limits.monthly_tokens,
                limits.daily_usd,
                limits.monthly_usd,
            ],
        )
        return None if int(code) == 0 else _refused(int(code), now)

    async def release(self, *, key_id: int, request_id: str) -> None:
        await self.client.zrem(f"gw:open:{key_id}", request_id)

    def add(self, *, key_id: int, tokens: int, usd: float, now: datetime) -> None:
        if tokens <= 0 and usd <= 0:
            return
        day, month, _, _ = _keys(key_id, now)
        for period in (day, month):
            counts = self._pending.setdefault(period, [0, 0.0])
            counts[0] += tokens
            counts[1] += usd

    async def flush(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        pipe = self.client.pipeline(transaction=False)
        for name, (tokens, usd) in pending.items():
            pipe.hincrby(name, "t", int(tokens))
            pipe.hincrbyfloat(name, "u", usd)
            pipe.expire(name, _KEPT[name.split(":")[3]])
        await pipe.execute()


class MemoryLimits:
    """The same counts in this process's memory: only for one gateway process (the
    embedded default, which has no Redis)."""

    def __init__(self) -> None:
        self.used: dict[str, list[float]] = {}
        self.open: dict[int, dict[str, float]] = {}
        self.minutes: dict[str, int] = {}

    async def admit(
        self, *, key_id: int, limits: KeyLimits, request_id: str, now: datetime
    ) -> Refused | None:
        if not limits.any:
            return None
        day, month, _, minute = _keys(key_id, now)
        d, m = self.used.get(day, [0, 0.0]), self.used.get(month, [0, 0.0])
        caps = (
            (limits.daily_tokens, d[0]),
            (limits.monthly_tokens, m[0]),
            (limits.daily_usd, d[1]),
            (limits.monthly_usd, m[1]),
        )
        for code, (cap, used) in enumerate(caps, start=1):
            if cap and used >= cap:
                return _refused(code, now)
        seconds = time.monotonic()
        opened = {r: t for r, t in self.open.get(key_id, {}).items() if t > seconds}
        if limits.max_streams and len(opened) >= limits.max_streams:
            return _refused(5, now)
        if limits.requests_per_minute:
            if len(self.minutes) > MAX_MINUTES:  # past minutes count for nothing
                self.minutes = {k: v for k, v in self.minutes.items() if k == minute}
            self.minutes[minute] = self.minutes.get(minute, 0) + 1
            if self.minutes[minute] > limits.requests_per_minute:
                return _refused(6, now)
        opened[request_id] = seconds + LEASE_SECONDS
        self.open[key_id] = opened
        return None

    async def release(self, *, key_id: int, request_id: str) -> None:
        self.open.get(key_id, {}).pop(request_id, None)

    def add(self, *, key_id: int, tokens: int, usd: float, now: datetime) -> None:
        day, month, _, _ = _keys(key_id, now)
        for period in (day, month):
            counts = self.used.setdefault(period, [0, 0.0])
            counts[0] += tokens
            counts[1] += usd

    async def flush(self) -> None:
        """Counted as they come: nothing to write."""


def key_limits(row: Any) -> KeyLimits:
    """A ``GatewayKey`` row's limits (None: 0, off)."""

    def number(value: Decimal | int | None) -> float:
        return float(value) if value is not None else 0.0

    return KeyLimits(
        requests_per_minute=row.requests_per_minute or 0,
        max_streams=row.max_streams or 0,
        daily_tokens=row.daily_tokens or 0,
        monthly_tokens=row.monthly_tokens or 0,
        daily_usd=number(row.daily_usd),
        monthly_usd=number(row.monthly_usd),
    )
