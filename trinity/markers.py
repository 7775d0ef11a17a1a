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

    Get-then-delete is not atomic: a claim that lapses between the two and is taken
    by someone else would be dropped. Callers size the TTL so their own claim cannot
    lapse while they hold it, which leaves that race no window.
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


def marker_set(name: str, *, value: str, ttl: int) -> bool:
    """Set ``name`` to ``value`` for ``ttl`` seconds whether or not it is held; False
    if the cache is unreachable."""
    try:
        cache.set(_key(name), value, timeout=ttl)
    except STORE_ERRORS:
        logger.warning("cache unreachable: marker %s not set", name)
        return False
    return True


def markers_read(names: Iterable[str]) -> dict[str, str] | None:
    """The value of each held marker among ``names`` (one round trip), or None if the
    cache is unreachable."""
    keys = {_key(name): name for name in names}
    try:
        found = cache.get_many(list(keys))
    except STORE_ERRORS:
        logger.warning("cache unreachable: markers not read")
        return None
    return {keys[key]: str(value) for key, value in found.items()}


class OutageNotice:
    """Logs a store outage once per outage, not once per turn that meets it; the next
    call that reaches the store again re-arms it."""

    def __init__(self, message: str, *, log: logging.Logger) -> None:
        self.message = message
        self.log = log
        self.logged = False

    def down(self, what: str) -> None:
        if not self.logged:
            self.logged = True
            self.log.warning("%s (%s)", self.message, what)

    def up(self) -> None:
        self.logged = False
