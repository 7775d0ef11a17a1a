"""``/healthz`` and ``/readyz`` on a real web process (gunicorn with the deploy conf).

``/readyz`` is driven through real outages: the process runs on a Postgres cluster and
a Redis server of this test's own (never the machine's shared ones), which the test
really stops and starts again. Bounded in time; everything started here is stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.operations.services import (
    PostgresCluster,
    RedisServer,
    gunicorn,
    manage,
    platform_env,
    throwaway_postgres,
    throwaway_redis,
)

RECOVERY_SECONDS = 30.0


def readyz(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{url}/readyz", timeout=10)
    return response.status_code, response.json()


def wait_until(url: str, status: int) -> dict[str, Any]:
    """Poll /readyz until it answers ``status`` (a restarted server takes a moment)."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    while True:
        code, body = readyz(url)
        if code == status:
            return body
        if time.monotonic() > deadline:
            pytest.fail(f"/readyz still answers {code} {body} after {RECOVERY_SECONDS} s")
        time.sleep(0.2)  # polling a real process


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[tuple[str, PostgresCluster, RedisServer, dict[str, str]]]:
    with throwaway_postgres() as postgres, throwaway_redis() as redis:
        env = platform_env(tmp_path, DATABASE_URL=postgres.url, REDIS_URL=redis.url)
        with gunicorn(env, log_path=tmp_path / "web.log") as url:
            yield url, postgres, redis, env


def test_readyz_follows_migrations_postgres_and_redis_and_recovers(
    platform: tuple[str, PostgresCluster, RedisServer, dict[str, str]],
) -> None:
    url, postgres, redis, env = platform

    # A fresh database: everything answers, but the schema is not there yet.
    code, body = readyz(url)
    assert code == 503
    assert body["checks"] == {
        "database": "ok",
        "migrations": "pending",
        "cache": "ok",
        "broker": "ok",
    }
    manage(env, "migrate", "--noinput")
    code, body = readyz(url)
    assert (code, body["status"]) == (200, "ok"), body

    redis.stop()
    code, body = readyz(url)
    assert code == 503
    assert body["checks"]["cache"] == "unavailable"
    assert body["checks"]["broker"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    # Alive all the same: an orchestrator must not restart a web process for it.
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    redis.start()
    assert wait_until(url, 200)["checks"]["cache"] == "ok"

    postgres.stop()
    code, body = readyz(url)
    assert code == 503
    assert body["checks"]["database"] == "unavailable"
    assert body["checks"]["cache"] == "ok"
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    postgres.start()
    assert wait_until(url, 200)["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "cache": "ok",
        "broker": "ok",
    }


def test_the_answers_name_no_host_or_error_text(
    platform: tuple[str, PostgresCluster, RedisServer, dict[str, str]],
) -> None:
    url, postgres, redis, _ = platform
    redis.stop()
    postgres.stop()
    response = httpx.get(f"{url}/readyz", timeout=10)
    assert response.status_code == 503
    assert str(redis.port) not in response.text and str(postgres.port) not in response.text
    assert "no-cache" in response.headers["Cache-Control"]


def test_compose_probes_web_by_readyz_and_the_others_by_their_own_checks() -> None:
    import yaml

    compose = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "deploy/compose.yaml").read_text()
    )
    services = compose["services"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    assert "readiness_check" in " ".join(services["beat"]["healthcheck"]["test"])
