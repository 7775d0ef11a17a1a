"""The snapshot store: three-state reads, one round trip for many, outages that never raise."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import cache
from django.test import override_settings

from routing.headroom.reading import (
    Reading,
    ReadingStatus,
    reading_decode,
    reading_encode,
    reading_to_json,
)
from subscriptions.headroom import store
from subscriptions.headroom.store import (
    SNAPSHOT_TTL_SECONDS,
    SnapshotState,
    snapshot_key,
    snapshot_read,
    snapshots_read,
    snapshots_write,
    turn_evidence_read,
)
from tests.headroom.readings import T0, limited, reading, window

# A real Redis client pointed at a port where nothing listens: a genuine outage.
UNREACHABLE_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:9/0",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
    }
}
ON_REDIS = bool(os.environ.get("REDIS_URL"))


# The embedded default keeps the store in the database cache.
pytestmark = pytest.mark.django_db


def test_a_reading_round_trips_with_aware_instants() -> None:
    stored = limited(resets_in=timedelta(hours=2))
    assert snapshots_write({7: stored})

    snapshots = snapshot_read(7)

    assert snapshots.state(7) is SnapshotState.READING
    back = snapshots.get(7)
    assert back == stored
    assert back is not None and back.fetched_at.tzinfo is not None
    assert back.windows["five_hour"].resets_at == T0 + timedelta(hours=2)


def test_every_read_is_three_state() -> None:
    snapshots_write({1: reading()})
    snapshots = snapshots_read([1, 2])
    assert (snapshots.state(1), snapshots.state(2)) == (
        SnapshotState.READING,
        SnapshotState.NO_READING,
    )
    with override_settings(CACHES=UNREACHABLE_REDIS):
        down = snapshots_read([1, 2])
    assert not down.reachable
    assert down.state(1) is SnapshotState.UNREACHABLE
    assert down.get(1) is None


def test_an_outage_never_raises_from_the_store(caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(CACHES=UNREACHABLE_REDIS):
        assert snapshots_write({1: reading()}) is False
    assert "unreachable" in caplog.text


def test_a_malformed_snapshot_counts_as_no_reading(caplog: pytest.LogCaptureFixture) -> None:
    cache.set(snapshot_key(3), {"fetched_at": "2030-01-01T12:00:00"})  # naive, no status
    with caplog.at_level(logging.WARNING):
        snapshots = snapshot_read(3)
    assert snapshots.state(3) is SnapshotState.NO_READING
    assert "malformed" in caplog.text


@pytest.mark.skipif(ON_REDIS, reason="moves the embedded cache's clock; Redis keeps its own")
def test_a_snapshot_lives_seven_days_on_the_embedded_cache() -> None:
    with time_machine.travel(T0, tick=False) as traveller:
        snapshots_write({5: reading()})
        traveller.shift(timedelta(seconds=SNAPSHOT_TTL_SECONDS - 1))
        assert snapshot_read(5).state(5) is SnapshotState.READING
        traveller.shift(timedelta(seconds=2))
        assert snapshot_read(5).state(5) is SnapshotState.NO_READING


@pytest.mark.redis
@pytest.mark.skipif(not ON_REDIS, reason="needs a real Redis: set REDIS_URL")
def test_a_snapshot_key_carries_a_seven_day_ttl_on_redis() -> None:
    snapshots_write({5: reading()})
    ttl = cache.ttl(snapshot_key(5))  # type: ignore[attr-defined]
    assert SNAPSHOT_TTL_SECONDS - 5 <= ttl <= SNAPSHOT_TTL_SECONDS


@pytest.mark.redis
@pytest.mark.skipif(not ON_REDIS, reason="needs a real Redis: set REDIS_URL")
def test_reading_many_snapshots_is_one_mget(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = list(range(1, 51))
    snapshots_write({pk: reading() for pk in ids[::2]})
    pool = cache.client.get_client(write=False).connection_pool  # type: ignore[attr-defined]
    connection_class = pool.connection_class
    sent: list[bytes] = []
    real = connection_class.send_packed_command

    def spy(self: Any, command: Any, check_health: bool = True) -> Any:
        sent.append(b"".join(command))
        return real(self, command, check_health)  # the real Redis still answers

    monkeypatch.setattr(connection_class, "send_packed_command", spy)

    snapshots = snapshots_read(ids)

    # One command on the wire: an array of MGET and every key.
    assert len(sent) == 1
    assert sent[0].startswith(f"*{1 + len(ids)}\r\n$4\r\nMGET\r\n".encode())
    assert sorted(snapshots.readings) == ids[::2]


# The compact snapshot form


@pytest.mark.parametrize(
    "stored",
    [
        reading(),
        limited(resets_in=timedelta(hours=2)),
        reading(five_hour=None, extra={"seven_day_sonnet": window(None, resets_in=None)}),
        Reading(fetched_at=T0, status=ReadingStatus.ERROR, detail="timed out"),
        Reading(
            fetched_at=T0 + timedelta(microseconds=1),
            status=ReadingStatus.RATE_LIMITED,
            reset_at=T0 + timedelta(hours=1, microseconds=999_999),
            representative_claim="five_hour",
            overage_status="rejected",
            source="headers",
        ),
    ],
)
def test_the_compact_form_round_trips_every_field_to_the_microsecond(stored: Reading) -> None:
    encoded = reading_encode(stored)
    assert encoded.startswith("h2:") and len(encoded) < len(str(reading_to_json(stored)))
    assert reading_decode(encoded) == stored
    assert snapshots_write({9: stored}) and snapshot_read(9).get(9) == stored


def test_a_snapshot_stored_before_the_compact_form_still_decodes() -> None:
    legacy = limited(resets_in=timedelta(hours=2))
    cache.set(snapshot_key(4), reading_to_json(legacy))  # what the store used to write
    assert snapshot_read(4).get(4) == legacy
    assert snapshots_read([4, 5]).readings == {4: legacy}
    assert turn_evidence_read(4).reading == legacy


@pytest.mark.parametrize("value", ["h2:[1]", "h2:not json", "v9:[]", 42])
def test_a_malformed_compact_snapshot_counts_as_no_reading(
    value: object, caplog: pytest.LogCaptureFixture
) -> None:
    cache.set(snapshot_key(3), value)
    with caplog.at_level(logging.WARNING):
        assert snapshots_read([3]).state(3) is SnapshotState.NO_READING
    assert "snapshot" in caplog.text


def test_on_redis_a_stored_value_is_decoded_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []

    def counting(value: object) -> Reading:
        calls.append(value)
        return reading_decode(value)

    monkeypatch.setattr(store, "reading_decode", counting)
    store._decoded.clear()
    snapshots_write({1: reading(), 2: limited()})
    first, second = snapshots_read([1, 2]), snapshots_read([1, 2])
    assert first.readings == second.readings == {1: reading(), 2: limited()}
    # The embedded cache decodes every read; Redis once per stored value.
    assert len(calls) == (2 if ON_REDIS else 4)
    snapshots_write({1: reading(seven_day=55.0)})  # a new value decodes anew
    assert snapshots_read([1]).get(1) == reading(seven_day=55.0)
    assert len(calls) == (3 if ON_REDIS else 5)
