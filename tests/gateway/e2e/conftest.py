"""A real gateway process (``python -m gateway``) on the test database, in front of the
package's provider simulator through a recording tap, and the pool it serves.

The gateway is started once per module and reads the test's rows through its own
connections, so the tests commit (``transaction=True``). The tap is a plain TCP relay
that keeps every byte the gateway sent upstream: what a provider would have seen.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from gateway.models import GatewayUsage
from gateway.server.recording import FLUSH_SECONDS
from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.gateway.e2e.support import MAX_BODY, METRICS_TOKEN, Gateway, Tap
from tests.operations.services import (
    BOOT_SECONDS,
    _stop,
    free_port,
    platform_env,
    shared_database_url,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gateway(
    simulator: SimulatorProcess,
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    if not settings.REDIS_URL:
        pytest.fail("the gateway tests need Redis: its processes share the limits")
    with django_db_blocker.unblock():
        database_url = shared_database_url()
    tap = Tap(("127.0.0.1", int(simulator.base_url.rsplit(":", 1)[1])))
    tap.start()
    home = tmp_path_factory.mktemp("gateway")
    env = platform_env(
        home / "var",
        DATABASE_URL=database_url,
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=tap.url,
        TRINITY_CODEX_BASE_URL=tap.url,
        TRINITY_CODEX_AUTH_URL=simulator.base_url,
        TRINITY_CLAUDE_OAUTH_TOKEN_URL=simulator.base_url + "/v1/oauth/token",
        TRINITY_OPENAI_BASE_URL=tap.url,
        TRINITY_METRICS_TOKEN=METRICS_TOKEN,
        TRINITY_GATEWAY_MAX_BODY_BYTES=str(MAX_BODY),
        TRINITY_GATEWAY_POLL_SECONDS="1",
    )
    port = free_port()
    log_path = home / "gateway.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, log_path)
        yield Gateway(url, log_path, tap)
    finally:
        _stop(proc)
        log.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + BOOT_SECONDS
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the gateway exited at boot:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the gateway did not answer in time:\n{log_path.read_text()}")
        time.sleep(0.1)  # polling a real process's socket


@pytest.fixture
def gw(gateway: Gateway, control: SimulatorControl) -> Iterator[Gateway]:
    """The module's gateway, with the simulator reset for this test; at its end, the
    gateway's writes of this test are settled before the database is emptied."""
    gateway.tap.upstream.clear()
    yield gateway
    settled(gateway)


def settled(gateway: Gateway) -> None:
    """Wait until the gateway serves nothing and its recorder has written what the
    test's requests queued (a flush every ``FLUSH_SECONDS``). The test database is
    emptied by one TRUNCATE of every table after each test; a usage COPY landing in
    the middle of it deadlocks with it (the COPY's foreign-key check against the
    TRUNCATE's locks), and the TRUNCATE loses."""
    deadline = time.monotonic() + 10
    while _open_requests(gateway) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a real process's gauge
    rows = -1
    while time.monotonic() < deadline:
        now = GatewayUsage.objects.count()
        if now == rows:
            return
        rows = now
        time.sleep(FLUSH_SECONDS * 2)  # a flush period has passed: another look


def _open_requests(gateway: Gateway) -> float:
    scraped = httpx.get(
        gateway.url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    for line in scraped.text.splitlines():
        if line.startswith("trinity_gateway_open_requests "):
            return float(line.split()[-1])
    return 0.0


@pytest.fixture
def person(db: None) -> User:
    return User.objects.create_user("dev", password="x")
