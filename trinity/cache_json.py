"""How a value is stored in the shared cache: JSON text, never a pickle.

Django's cache backends pickle by default, and unpickling runs whatever code the bytes
name. The cache is not ours alone to write (anything that reaches Redis can write any
key), so a value read from it must never be able to run code: every value the
platform stores is JSON (``cache_value_dump``, strict: a datetime, a Decimal, a set or
a dataclass is a ``TypeError`` at the call that stores it, never a silent string), and
every value read is parsed as JSON (``cache_value_load``). A stored value that does not
parse (a pickle, garbage) is treated as absent and logged, with the key.

- Redis (``django_redis``): ``JsonSerializer`` encodes, and ``JsonCacheClient`` turns an
  unreadable value into "absent" for ``get`` and ``get_many``.
- The embedded database cache: ``JsonDatabaseCache`` keeps Django's SQL but stores the
  JSON text in the value column where Django stores base64 of a pickle.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.db import DatabaseError, connections, models, router, transaction
from django.utils.timezone import now as tz_now
from django_redis.client import DefaultClient
from django_redis.serializers.base import BaseSerializer

logger = logging.getLogger(__name__)


class UnreadableCacheValue(ValueError):
    """A stored value that is not JSON text (a pickle, garbage): read as absent."""


def cache_value_dump(value: Any) -> str:
    """``value`` as JSON text; TypeError for anything JSON does not carry as itself.

    Strict on purpose: ``DjangoJSONEncoder`` would store a datetime or a Decimal as a
    string and hand a string back, a bug that shows only when the value is read. A
    tuple is stored as a list (JSON has one kind of array).
    """
    return json.dumps(value, separators=(",", ":"))


def cache_value_load(raw: bytes | str) -> Any:
    """The value JSON text stands for; ``UnreadableCacheValue`` when it is not JSON."""
    try:
        return json.loads(raw)
    except (ValueError, TypeError):  # UnicodeDecodeError and JSONDecodeError included
        raise UnreadableCacheValue("not JSON") from None


def _refused(key: object) -> None:
    # Not the value: it may be anything, and it was not ours.
    logger.warning("cache: the value under %s is not JSON; read as absent", key)


class JsonSerializer(BaseSerializer):
    """django-redis's serializer: JSON text both ways (``OPTIONS["SERIALIZER"]``)."""

    def dumps(self, value: Any) -> bytes:
        return cache_value_dump(value).encode()

    def loads(self, value: bytes) -> Any:
        return cache_value_load(value)


_UNREADABLE = object()


class JsonCacheClient(DefaultClient):
    """django-redis's client, with a value that does not parse read as absent (and
    logged) by ``get`` and ``get_many``; ``decode`` hands such a value back as an
    object no reader accepts (the headroom store's raw read)."""

    def decode(self, value: bytes | int | str) -> Any:
        try:
            return super().decode(value)
        except UnreadableCacheValue:
            return _UNREADABLE

    def get(self, key: str, default: Any | None = None, *args: Any, **kwargs: Any) -> Any:
        value = super().get(key, default, *args, **kwargs)
        if value is _UNREADABLE:
            _refused(key)
            return default
        return value

    def get_many(self, keys: Collection[str], *args: Any, **kwargs: Any) -> dict[str, Any]:
        found = super().get_many(keys, *args, **kwargs)
        for key in [k for k, v in found.items() if v is _UNREADABLE]:
            _refused(key)
            del found[key]
        return found


class JsonDatabaseCache(DatabaseCache):
    """Django's database cache with JSON text in the value column.

    Only the two methods that pickle are replaced (``get_many`` reads, ``_base_set``
    writes); their SQL is Django's own (django/core/cache/backends/db.py), so ``add``
    stays one insert on the key's primary key, which the markers rely on.
    """

    _table: str  # set by Django's __init__ (the stubs do not declare it)

    def get_many(self, keys: Iterable[str], version: int | None = None) -> dict[str, Any]:
        key_map = {self.make_and_validate_key(key, version=version): key for key in keys}
        if not key_map:
            return {}
        connection = connections[router.db_for_read(self.cache_model_class)]
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote('cache_key')}, {quote('value')}, {quote('expires')} "  # noqa: S608 - names quoted, values bound
                f"FROM {quote(self._table)} WHERE {quote('cache_key')} IN "
                f"({', '.join(['%s'] * len(key_map))})",
                list(key_map),
            )
            rows = cursor.fetchall()
        result: dict[str, Any] = {}
        expired: list[str] = []
        for key, value, expires in rows:
            if _expiry_value(connection, expires) < tz_now():
                expired.append(key)
                continue
            try:
                result[key_map[key]] = cache_value_load(connection.ops.process_clob(value))
            except UnreadableCacheValue:
                _refused(key)
        self._base_delete_many(expired)  # type: ignore[attr-defined]
        return result

    def _base_set(
        self, mode: str, key: str, value: Any, timeout: float | None = DEFAULT_TIMEOUT
    ) -> bool:
        encoded = "" if mode == "touch" else cache_value_dump(value)
        backend_timeout = self.get_backend_timeout(timeout)
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(self._table)}")  # noqa: S608 - a quoted name
            num = cursor.fetchone()[0]
            now = tz_now().replace(microsecond=0)
            if num > self._max_entries:
                self._cull(db, cursor, now, num)  # type: ignore[attr-defined]
            try:
                with transaction.atomic(using=db):
                    return self._write(cursor, connection, mode, key, encoded, backend_timeout, now)
            except DatabaseError:
                # Django's choice: racing writers may fail silently (the other one won).
                return False

    def _write(
        self,
        cursor: Any,
        connection: Any,
        mode: str,
        key: str,
        encoded: str,
        timeout: float | None,
        now: datetime,
    ) -> bool:
        quote = connection.ops.quote_name
        table, key_col = quote(self._table), quote("cache_key")
        value_col, expires_col = quote("value"), quote("expires")
        cursor.execute(
            f"SELECT {key_col}, {expires_col} FROM {table} WHERE {key_col} = %s",  # noqa: S608 - names quoted
            [key],
        )
        row = cursor.fetchone()
        expires = connection.ops.adapt_datetimefield_value(_expiry(timeout))
        if row and mode == "touch":
            cursor.execute(
                f"UPDATE {table} SET {expires_col} = %s WHERE {key_col} = %s",  # noqa: S608
                [expires, key],
            )
        elif row and (mode == "set" or (mode == "add" and _expiry_value(connection, row[1]) < now)):
            cursor.execute(
                f"UPDATE {table} SET {value_col} = %s, {expires_col} = %s WHERE {key_col} = %s",  # noqa: S608
                [encoded, expires, key],
            )
        elif mode != "touch":
            cursor.execute(
                f"INSERT INTO {table} ({key_col}, {value_col}, {expires_col}) VALUES (%s, %s, %s)",  # noqa: S608
                [key, encoded, expires],
            )
        else:
            return False  # touch of a missing key
        return True


def _expiry(timeout: float | None) -> datetime:
    if timeout is None:
        return datetime.max.replace(microsecond=0)  # noqa: DTZ901 - Django's "never expires"
    return datetime.fromtimestamp(timeout, tz=UTC if settings.USE_TZ else None).replace(
        microsecond=0
    )


def _expiry_value(connection: Any, raw: Any) -> datetime:
    """A stored ``expires`` column as a datetime (aware or naive as the database gives)."""
    expression = models.Expression(output_field=models.DateTimeField())
    converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(
        connection
    )
    for converter in converters:
        raw = converter(raw, expression, connection)
    return raw
