from __future__ import annotations

import pytest
from django.test import override_settings

from trinity.markers import marker_claim, marker_release, markers_release

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
