from __future__ import annotations

import pytest
from django.test import override_settings

from trinity.markers import (
    marker_claim,
    marker_release,
    marker_set,
    markers_read,
    markers_release,
)

pytestmark = pytest.mark.django_db

# Real caches in a real outage: a Redis client aimed at a closed port, and a database
# cache whose table does not exist.
UNREACHABLE = {
    "redis": {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    },
    "database": {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "no_such_cache_table",
        }
    },
}


def test_a_marker_is_claimed_once_until_released_by_its_holder() -> None:
    assert marker_claim("leader", ttl=60, value="mine") is True
    assert marker_claim("leader", ttl=60, value="theirs") is False
    marker_release("leader", value="theirs")  # not theirs to release
    assert marker_claim("leader", ttl=60) is False
    marker_release("leader", value="mine")
    assert marker_claim("leader", ttl=60) is True
    markers_release(["leader"])
    assert marker_claim("leader", ttl=60) is True


@pytest.mark.parametrize("store", sorted(UNREACHABLE))
def test_an_unreachable_cache_answers_none_and_never_raises(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(CACHES=UNREACHABLE[store]):
        assert marker_claim("x", ttl=10) is None
        marker_release("x")
        markers_release(["x"])
    assert "unreachable" in caplog.text


def test_a_set_marker_is_read_back_with_every_other_held_one_in_one_call() -> None:
    assert marker_set("retry:1", value="2030-01-01T12:10:00+00:00", ttl=60) is True
    assert marker_claim("retry:2", ttl=60, value="held") is True
    assert marker_set("retry:2", value="overwritten", ttl=60) is True  # held or not

    assert markers_read(["retry:1", "retry:2", "retry:3"]) == {
        "retry:1": "2030-01-01T12:10:00+00:00",
        "retry:2": "overwritten",
    }


@pytest.mark.parametrize("store", sorted(UNREACHABLE))
def test_setting_and_reading_markers_in_an_outage_answers_and_never_raises(store: str) -> None:
    with override_settings(CACHES=UNREACHABLE[store]):
        assert marker_set("x", value="v", ttl=10) is False
        assert markers_read(["x"]) is None
