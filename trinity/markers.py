"""Markers: short-lived claims in the cache with a TTL (a leader lock, single-flight,
notification dedup).

``cache.add`` is atomic on both stores this runs on: Redis (SET NX) and the embedded
database cache (an insert on the key's primary key). Nothing here raises for an
outage: a claim answers None and each caller decides what "unreachable" means for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.core.cache import cache
from django.db import DatabaseError
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# What an unreachable cache raises: django-redis wraps most of it, the database cache
# raises DatabaseError.
STORE_ERRORS: tuple[type[Exception], ...] = (
    ConnectionInterrupted,
    RedisError,
    DatabaseError,
    OSError,
)


def _key(name: str) -> str:
    return f"marker:{name}"


def marker_claim(name: str, *, ttl: int, value: str = "1") -> bool | None:
    """Claim ``name`` for ``ttl`` seconds: True if claimed, False if held, None if the
    cache is unreachable."""
    try:
        return bool(cache.add(_key(name), value, timeout=ttl))
    except STORE_ERRORS:
        logger.warning("cache unreachable: marker %s not claimed", name)
        return None


def marker_release(name: str, *, value: str | None = None) -> None:
    """Drop ``name``; with ``value``, only if it still holds that value (our own claim).

    Get-then-delete is not atomic; the TTL bounds what a lost race can cost.
    """
    try:
        if value is None or cache.get(_key(name)) == value:
            cache.delete(_key(name))
    except STORE_ERRORS:
        logger.warning("cache unreachable: marker %s left to expire", name)


def markers_release(names: Iterable[str]) -> None:
    try:
        cache.delete_many([_key(name) for name in names])
    except STORE_ERRORS:
        logger.warning("cache unreachable: markers left to expire")
