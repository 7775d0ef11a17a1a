"""The snapshot store: the latest reading per subscription, and the sampler's markers.

It goes through Django's cache: django-redis when REDIS_URL is set, the database
cache otherwise. One key per subscription with a 7-day TTL; reading many subscriptions is
one ``get_many`` (one MGET on Redis). Every read is three-state (a reading, no
reading, the store unreachable) and nothing here raises for an outage: a turn must
never wait on Redis. Readings cross this boundary in the compact snapshot form
(``reading_encode``: a string, instants as integer microseconds) and come back as
aware datetimes; a value the store wrote before it (a JSON dict with ISO instants)
still decodes. On Redis, ``snapshots_read`` fetches the raw bytes and keeps what it
decoded per stored value: a reading is decoded once per process, not once per read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from itertools import compress, repeat
from operator import is_, is_not
from typing import Any, cast

import hiredis
from django.core.cache import cache, caches

from routing.headroom.exhaustion_forecast import Forecast, forecast_from_json, forecast_key
from routing.headroom.reading import (
    Reading,
    parse_instant,
    reading_decode,
    reading_encode,
)
from trinity.markers import STORE_ERRORS

logger = logging.getLogger(__name__)

SNAPSHOT_TTL_SECONDS = 7 * 24 * 3600


class SnapshotState(StrEnum):
    READING = "reading"
    NO_READING = "no_reading"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Snapshots:
    """The outcome of one read of many snapshots."""

    reachable: bool
    readings: dict[int, Reading] = field(default_factory=dict)

    def get(self, subscription_id: int) -> Reading | None:
        return self.readings.get(subscription_id)

    def state(self, subscription_id: int) -> SnapshotState:
        if not self.reachable:
            return SnapshotState.UNREACHABLE
        if subscription_id in self.readings:
            return SnapshotState.READING
        return SnapshotState.NO_READING


def snapshot_key(subscription_id: int) -> str:
    return f"headroom:snapshot:{subscription_id}"


_MALFORMED = (KeyError, TypeError, ValueError, AttributeError)
# Stored bytes → the reading they decode to (Redis only). Readings are immutable and
# a value's bytes determine it, so an entry never goes wrong, only unused: the memo
# is dropped whole when it outgrows a few sweeps' worth of distinct values.
_decoded: dict[bytes, Reading] = {}
DECODED_MAX = 100_000
# Key prefix → subscription id → its raw snapshot key: building 10,000 keys costs
# more than looking them up.
_raw_keys: dict[str, dict[int, bytes]] = {}


def _redis_backend() -> Any | None:
    """The django-redis backend in use, if the default cache is one."""
    backend = caches["default"]
    try:
        from django_redis.cache import RedisCache
    except ImportError:  # pragma: no cover - a dependency
        return None
    return backend if isinstance(backend, RedisCache) else None


def _read_raw(backend: Any, ids: list[int]) -> dict[int, Reading]:
    # django-redis's get_many builds each key through make_key and unpickles every
    # value: most of the cost of a large read. One MGET of keys built from the
    # prefix, and a memo lookup per value, instead.
    prefix = str(backend.make_key(""))
    if str(backend.make_key("probe")) != prefix + "probe":
        raise LookupError("a custom KEY_FUNCTION: no raw read")  # caught: get_many path
    known = _raw_keys.get(prefix)
    if known is None or len(known) >= DECODED_MAX:
        known = _raw_keys[prefix] = {}
    raw_keys: list[bytes | None] = list(map(known.get, ids))
    for i in compress(range(len(raw_keys)), map(is_, raw_keys, repeat(None))):
        raw_keys[i] = known[ids[i]] = f"{prefix}headroom:snapshot:{ids[i]}".encode()
    values = _mget(backend.client.get_client(write=False), cast("list[bytes]", raw_keys))
    # Warm, every stored value is in the memo: the lookups and the dict are built by C
    # code (``map``, ``compress``); only the values the memo lacks are decoded here.
    found: list[Reading | None] = list(map(_decoded.get, values))
    for i in compress(range(len(found)), map(is_, found, repeat(None))):
        if values[i] is not None:
            found[i] = _decoded_value(backend, ids[i], values[i])
    kept = compress(zip(ids, found, strict=True), map(is_not, found, repeat(None)))
    return cast("dict[int, Reading]", dict(kept))


def _mget(client: Any, keys: list[bytes]) -> list[Any]:
    """One MGET of ``keys`` (bytes) on a connection of ``client``'s pool, the command
    packed by hiredis in one call: redis-py's own packing encodes each of 10,000
    arguments in Python first, a fifth of a warm read. A failure drops the connection
    and raises (the caller's store errors: the store is unreachable)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        # hiredis's stub types the arguments as a 1-tuple; it takes any number.
        command = hiredis.pack_command((b"MGET", *keys))  # type: ignore[arg-type]
        connection.send_packed_command([command])
        values: list[Any] = connection.read_response()
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return values


def _decoded_value(backend: Any, pk: int, raw: bytes) -> Reading | None:
    """``raw`` (the stored bytes of ``pk``'s snapshot) decoded and memoised; None when
    it is malformed (logged)."""
    try:
        reading = reading_decode(backend.client.decode(raw))
    except _MALFORMED:
        logger.warning("headroom store: discarding a malformed snapshot of %d", pk)
        return None
    except Exception:  # noqa: BLE001 - an unpicklable value is malformed too
        logger.warning("headroom store: discarding an unreadable snapshot of %d", pk)
        return None
    if len(_decoded) >= DECODED_MAX:
        _decoded.clear()
    _decoded[raw] = reading
    return reading


def snapshots_read(subscription_ids: Iterable[int]) -> Snapshots:
    """Read the snapshots of ``subscription_ids`` in one round trip.

    A malformed stored value counts as no reading (and is logged).
    """
    ids = list(subscription_ids)
    if not ids:
        return Snapshots(reachable=True)
    backend = _redis_backend()
    if backend is not None:
        try:
            return Snapshots(reachable=True, readings=_read_raw(backend, ids))
        except STORE_ERRORS:
            logger.warning("headroom store unreachable: %d snapshots unread", len(ids))
            return Snapshots(reachable=False)
        except LookupError:
            pass
    keys = {snapshot_key(pk): pk for pk in ids}
    try:
        raw = cache.get_many(list(keys))
    except STORE_ERRORS:
        logger.warning("headroom store unreachable: %d snapshots unread", len(keys))
        return Snapshots(reachable=False)
    readings: dict[int, Reading] = {}
    for key, value in raw.items():
        try:
            readings[keys[key]] = reading_decode(value)
        except _MALFORMED:
            logger.warning("headroom store: discarding a malformed snapshot (%s)", key)
    return Snapshots(reachable=True, readings=readings)


def snapshot_read(subscription_id: int) -> Snapshots:
    return snapshots_read([subscription_id])


def snapshots_write(readings: Mapping[int, Reading]) -> bool:
    """Store each reading under its subscription's key; False if the store is unreachable."""
    if not readings:
        return True
    values = {snapshot_key(pk): reading_encode(r) for pk, r in readings.items()}
    try:
        cache.set_many(values, timeout=SNAPSHOT_TTL_SECONDS)
    except STORE_ERRORS:
        logger.warning("headroom store unreachable: %d readings not stored", len(values))
        return False
    return True


def snapshots_delete(subscription_ids: Iterable[int]) -> None:
    try:
        cache.delete_many([snapshot_key(pk) for pk in subscription_ids])
    except STORE_ERRORS:
        logger.warning("headroom store unreachable: snapshots not deleted")


# The latest refusal of each subscription, beside its snapshot: the pre-dispatch check
# reads both in one round trip instead of asking the database about events.


@dataclass(frozen=True)
class RefusalMark:
    """The latest refusal recorded against one subscription (its event is the truth)."""

    at: datetime
    failure_kind: str | None
    resets_at: datetime | None = None
    # The window the refusal was limited by ("" unknown; ``throttle`` for a backoff):
    # a family window's mark keeps out only that family's turns.
    limiting_window: str = ""


def refusal_key(subscription_id: int) -> str:
    return f"refusal:latest:{subscription_id}"


def refusal_marker_delete(subscription_id: int) -> None:
    """Forget the plan's refusal marker (its events were cleared); an outage only logs."""
    try:
        cache.delete(refusal_key(subscription_id))
    except STORE_ERRORS:
        logger.warning("cache unreachable: refusal marker of %d not deleted", subscription_id)


def refusal_marker_write(subscription_id: int, mark: RefusalMark, *, ttl: int) -> None:
    """Remember ``mark`` for ``ttl`` seconds; an outage only costs the shortcut."""
    value = {
        "at": mark.at.isoformat(),
        "failure_kind": mark.failure_kind,
        "resets_at": mark.resets_at.isoformat() if mark.resets_at else None,
        "limiting_window": mark.limiting_window,
    }
    try:
        cache.set(refusal_key(subscription_id), value, timeout=ttl)
    except STORE_ERRORS:
        logger.warning("cache unreachable: refusal marker of %d not written", subscription_id)


@dataclass(frozen=True)
class TurnEvidence:
    """What the cache knows of one subscription before a turn: one round trip."""

    reachable: bool
    reading: Reading | None = None
    refusal: RefusalMark | None = None
    # The exhaustion forecast the sampler stored beside the snapshot, if any.
    forecast: Forecast | None = None


def turn_evidence_read(subscription_id: int) -> TurnEvidence:
    """The snapshot, the latest refusal mark and the exhaustion forecast of
    ``subscription_id`` in one round trip; never raises."""
    snapshot, refusal = snapshot_key(subscription_id), refusal_key(subscription_id)
    forecast_at = forecast_key(subscription_id)
    try:
        raw = cache.get_many([snapshot, refusal, forecast_at])
    except STORE_ERRORS:
        return TurnEvidence(reachable=False)
    reading = mark = None
    try:
        if snapshot in raw:
            reading = reading_decode(raw[snapshot])
        if refusal in raw:
            value = raw[refusal]
            at = parse_instant(value["at"])
            if at is None:
                raise ValueError("a refusal mark needs its instant")
            mark = RefusalMark(
                at=at,
                failure_kind=value.get("failure_kind"),
                resets_at=parse_instant(value.get("resets_at")),
                limiting_window=str(value.get("limiting_window") or ""),
            )
    except (KeyError, TypeError, ValueError, AttributeError):
        logger.warning("headroom store: discarding malformed evidence of %d", subscription_id)
    forecast = None
    if forecast_at in raw:
        try:
            forecast = forecast_from_json(raw[forecast_at])
        except (KeyError, TypeError, ValueError, AttributeError):
            logger.warning("headroom store: discarding a malformed forecast of %d", subscription_id)
    return TurnEvidence(reachable=True, reading=reading, refusal=mark, forecast=forecast)
