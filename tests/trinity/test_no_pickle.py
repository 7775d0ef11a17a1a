"""No value read from the cache or the broker can run code.

Whatever reaches Redis (on the local runtime, a tool call of an agent once did) can
write any key. These tests write a pickle that would create a file when unpickled
straight into the store, under every key the platform wrote while signing people in,
checking tokens, storing headroom, refusal marks and forecasts and claiming markers,
then drive the same reads again (a login check, a token check, the pre-dispatch read,
the panel's snapshot read, markers, the readiness check): no file appears, each read
treats the value as absent, and the log names the key. Then the same for the embedded
database cache, and a pickled task message on a real worker's broker.
"""

from __future__ import annotations

import base64
import logging
import pickle
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from rest_framework.test import APIClient

from routing.headroom.exhaustion_forecast import forecast_key
from subscriptions.headroom.forecast_store import headroom_forecasts_read
from subscriptions.headroom.store import (
    RefusalMark,
    refusal_marker_write,
    snapshots_read,
    snapshots_write,
    turn_evidence_read,
)
from tests.agents.factories import UserFactory
from tests.headroom.readings import T0, reading
from trinity.health import readiness_check
from trinity.markers import marker_claim, marker_release, markers_read

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SUBSCRIPTION = 7


class _Payload:
    """Unpickled, it opens (so creates) ``path``: code chosen by whoever wrote the bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def pickled(path: Path) -> bytes:
    return pickle.dumps(_Payload(path), protocol=pickle.HIGHEST_PROTOCOL)


@pytest.fixture
def alice(db: None) -> User:
    user = UserFactory.create(username="alice")
    user.set_password("the-right-password")
    user.save()
    return user


def _login(username: str, password: str, ip: str = "10.0.0.1") -> int:
    return int(
        Client()
        .post(
            "/api/auth/login",
            {"username": username, "password": password},
            content_type="application/json",
            REMOTE_ADDR=ip,
        )
        .status_code
    )


def _write_what_the_platform_keeps() -> None:
    """Every kind of value the platform stores, through its own code."""
    assert _login("alice", "the-right-password") == 200  # a known address
    assert _login("alice", "wrong") == 400  # the throttle's histories
    token = APIClient(REMOTE_ADDR="10.0.0.1")
    token.credentials(HTTP_AUTHORIZATION="Token " + "0" * 64)
    assert token.get("/api/agents").status_code == 401
    assert snapshots_write({SUBSCRIPTION: reading(now=T0)})
    refusal_marker_write(SUBSCRIPTION, RefusalMark(at=NOW, failure_kind="rate_limit"), ttl=3600)
    cache.set(forecast_key(SUBSCRIPTION), {"computed_at": NOW.isoformat()}, 3600)
    assert marker_claim("leader", ttl=60, value="mine") is True
    assert readiness_check().ready


def _read_it_all_again() -> None:
    """The same reads, on the poisoned values: each answers as if nothing were stored."""
    assert _login("alice", "wrong") == 400  # checked, not refused by a count it read
    assert _login("alice", "the-right-password") == 200
    token = APIClient(REMOTE_ADDR="10.0.0.1")
    token.credentials(HTTP_AUTHORIZATION="Token " + "1" * 64)
    assert token.get("/api/agents").status_code == 401
    assert snapshots_read([SUBSCRIPTION]).get(SUBSCRIPTION) is None
    evidence = turn_evidence_read(SUBSCRIPTION)
    assert evidence.reachable and evidence.reading is None and evidence.refusal is None
    assert headroom_forecasts_read([SUBSCRIPTION]) == {}
    assert markers_read(["leader"]) == {}
    marker_release("leader", value="mine")  # reads it: not ours, so left alone
    assert readiness_check().ready


def _each_key_poisoned(
    plant: Callable[[bytes], list[str]], canary: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with time_machine.travel(NOW, tick=False):
        _write_what_the_platform_keeps()
        planted = plant(pickled(canary))
        assert len(planted) >= 8, planted  # throttles, known address, headroom, markers
        with caplog.at_level(logging.WARNING, logger="trinity.cache_json"):
            _read_it_all_again()
    assert not canary.exists(), "a value read from the cache ran code"
    refused = " ".join(r.getMessage() for r in caplog.records if r.name == "trinity.cache_json")
    assert "is not JSON; read as absent" in refused
    # The log names each key (with or without the cache's prefix, as its reader asked).
    read_back = {
        key.split(":", 2)[-1]
        for key in planted
        if key in refused or key.split(":", 2)[-1] in refused
    }
    assert {k for k in read_back if k.startswith("sign_in:")}, refused
    assert {"headroom:snapshot:7", "refusal:latest:7", "marker:leader"} <= read_back


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / f"ran-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def test_a_pickle_written_into_redis_under_any_key_runs_nothing(
    alice: User, canary: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not settings.REDIS_URL:
        pytest.fail("this test needs REDIS_URL: it writes into Redis behind the cache's back")
    from django_redis import get_redis_connection

    redis = get_redis_connection("default")

    def plant(payload: bytes) -> list[str]:
        keys = [k.decode() for k in redis.keys(cache.make_key("*"))]
        for key in keys:
            redis.set(key, payload, keepttl=True)
        return keys

    _each_key_poisoned(plant, canary, caplog)


def test_a_pickle_written_into_the_embedded_cache_table_runs_nothing(
    alice: User, canary: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = "trinity_cache_no_pickle"
    embedded = {**settings.DATABASE_CACHE, "LOCATION": table}
    with override_settings(CACHES={"default": embedded}):
        call_command("createcachetable", verbosity=0)

        def plant(payload: bytes) -> list[str]:
            # What Django's database cache stores: base64 of the pickle.
            value = base64.b64encode(payload).decode()
            with connection.cursor() as cursor:
                cursor.execute(f"UPDATE {table} SET value = %s", [value])  # noqa: S608
                cursor.execute(f"SELECT cache_key FROM {table}")  # noqa: S608
                return [row[0] for row in cursor.fetchall()]

        _each_key_poisoned(plant, canary, caplog)


def test_a_value_json_cannot_carry_is_refused_where_it_is_stored() -> None:
    """A datetime stored would come back a string (or, pickled, as code's choice): the
    call that stores it fails instead, on both stores."""
    for bad in (NOW, {1, 2}, timedelta(seconds=1)):
        with pytest.raises(TypeError):
            cache.set("not-json", bad, 60)
    cache.set("json", {"at": NOW.isoformat(), "pair": (1, 2)}, 60)
    assert cache.get("json") == {"at": NOW.isoformat(), "pair": [1, 2]}


def test_a_pickled_task_message_on_the_broker_is_refused_unread(
    canary: Path, tmp_path: Path
) -> None:
    """A real worker on a Redis broker of its own; a task message whose body is a
    pickle is refused before it is decoded, and the worker says so."""
    from kombu import Connection

    from tests.faults.harness import CeleryWorker, platform_env, throwaway_redis, wait_until

    log_path = tmp_path / "worker.log"
    with throwaway_redis() as broker:
        env = platform_env(tmp_path / "var", REDIS_URL=broker.url)
        worker = CeleryWorker(env, log_path=log_path, name=f"nopickle-{uuid.uuid4().hex[:6]}")
        worker.start()
        try:
            with Connection(broker.url) as conn:
                conn.Producer().publish(
                    ((_Payload(canary),), {}, {}),
                    exchange="celery",
                    routing_key="celery",
                    serializer="pickle",
                    headers={
                        "task": "trinity.resume_notification_deliveries",
                        "id": str(uuid.uuid4()),
                        "lang": "py",
                    },
                )
            wait_until(
                lambda: "untrusted content" in log_path.read_text(errors="replace"),
                seconds=30,
                what="the worker to refuse the pickled message",
            )
        finally:
            worker.stop()
    assert not canary.exists(), "a message from the broker ran code"
