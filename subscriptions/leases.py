"""Concurrency leases: how many attempts each capped subscription is serving right now,
across every process and host.

A lease is one running attempt on one subscription: a member of that subscription's
Redis sorted set, the member the execution id, the score the instant the lease
expires (the attempt's deadline). A worker that dies holding a lease never releases
it, so a lease is live only until its expiry: the dead holder's slot comes back by
itself, at the latest when its turn could no longer be running anyway.

Taking a lease is one Lua script (drop expired members, count, add), so two
processes can never both take a subscription's last slot. Redis unreachable, or not
configured (the embedded database cache has no sorted sets): no cap is enforced and
a warning says so once per outage; a cap is a courtesy to the provider, and must not
stop turns that could run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django_redis import get_redis_connection

from subscriptions.models import Subscription
from trinity.markers import STORE_ERRORS, OutageNotice

logger = logging.getLogger(__name__)

# Unreachable, or no Redis at all.
STORE_DOWN: tuple[type[Exception], ...] = (*STORE_ERRORS, NotImplementedError)

# KEYS[1] the subscription's lease set; ARGV: now, the lease's expiry, the holder, the
# cap. Answers 1 when the holder has a lease (new, or its own renewed), 0 at the cap.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    return 0
  end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
-- Relative to the caller's clock (the scores' clock), not the server's.
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(last[2]) - tonumber(ARGV[1])) + 1)
return 1
"""

_outage = OutageNotice(
    "lease store unreachable (or not Redis): concurrency caps are not enforced", log=logger
)


def _redis() -> Any:
    return get_redis_connection("default")


def lease_key(subscription_id: int) -> str:
    return cache.make_key(f"lease:subscription:{subscription_id}")


def at_capacity(caps: Mapping[int, int], live: Mapping[int, int]) -> set[int]:
    """The subscriptions serving their cap: ``live`` leases at or above ``caps``."""
    return {pk for pk, cap in caps.items() if live.get(pk, 0) >= cap}


def lease_acquire(
    *, subscription_id: int, holder: str, cap: int, expires_at: datetime, now: datetime
) -> bool | None:
    """Take (or renew) ``holder``'s lease on the subscription until ``expires_at``.

    True: held. False: the subscription is serving ``cap`` other attempts (nothing
    changed). None: the store is unreachable (the caller goes ahead uncapped).
    """
    try:
        taken = _redis().eval(
            _ACQUIRE,
            1,
            lease_key(subscription_id),
            repr(now.timestamp()),
            repr(expires_at.timestamp()),
            holder,
            cap,
        )
    except STORE_DOWN:
        _outage.down("acquire")
        return None
    _outage.up()
    return bool(taken)


def lease_release(*, subscription_id: int, holder: str) -> None:
    """Give ``holder``'s lease back; an unreachable store leaves it to expire."""
    try:
        _redis().zrem(lease_key(subscription_id), holder)
    except STORE_DOWN:
        _outage.down("release")


def leases_live(subscription_ids: Iterable[int], *, now: datetime) -> dict[int, int] | None:
    """Live leases per subscription (one round trip); None when the store is unreachable.

    A lease whose expiry is ``now`` is over.
    """
    wanted = list(subscription_ids)
    if not wanted:
        return {}
    try:
        pipe = _redis().pipeline(transaction=False)
        for pk in wanted:
            pipe.zcount(lease_key(pk), f"({now.timestamp()!r}", "+inf")
        counts = pipe.execute()
    except STORE_DOWN:
        _outage.down("count")
        return None
    _outage.up()
    return {pk: int(n) for pk, n in zip(wanted, counts, strict=True)}


def subscriptions_at_capacity(caps: Mapping[int, int], *, now: datetime) -> set[int]:
    """Which of the capped subscriptions ``caps`` (id -> cap) serve their cap now; none
    when the store is unreachable (uncapped, fail safe)."""
    if not caps:
        return set()
    live = leases_live(caps, now=now)
    return set() if live is None else at_capacity(caps, live)


def subscription_caps(provider: str) -> dict[int, int]:
    """The capped subscriptions of ``provider``: id -> max concurrency (one query)."""
    rows = Subscription.objects.filter(provider=provider, max_concurrency__isnull=False)
    return {pk: cap for pk, cap in rows.values_list("pk", "max_concurrency") if cap is not None}
