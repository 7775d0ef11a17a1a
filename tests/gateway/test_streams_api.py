"""``GET /api/gateway/streams``: the open requests of the caller's keys (an admin:
all), from Redis or, in the embedded default, from the gateway itself; a 503 that
says so when neither answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from gateway.models import GatewayKey
from gateway.open_streams import OpenStream
from tests.gateway.factories import GatewayKeyFactory, open_streams_publish

pytestmark = pytest.mark.django_db

URL = "/api/gateway/streams"
ON_REDIS = bool(settings.REDIS_URL)


def stream(key_id: int, owner_id: int, request_id: str, started_at: str) -> OpenStream:
    return OpenStream(
        request_id=request_id,
        key_id=key_id,
        owner_id=owner_id,
        provider="anthropic",
        model="claude-sonnet-4-5",
        started_at=started_at,
        served_by="max-a",
    )


@pytest.fixture
def streams(owner: User, other_user: User) -> tuple[list[OpenStream], GatewayKey]:
    mine = GatewayKeyFactory.create(owner=owner, name="laptop")
    theirs = GatewayKeyFactory.create(owner=other_user, name="theirs")
    return [
        stream(mine.pk, owner.pk, "r-2", "2026-06-01T12:00:02+00:00"),
        stream(theirs.pk, other_user.pk, "r-1", "2026-06-01T12:00:01+00:00"),
        # A key deleted while its request was open.
        stream(10**6, owner.pk, "r-3", "2026-06-01T12:00:03+00:00"),
    ], mine


class Gateway(BaseHTTPRequestHandler):
    """The embedded gateway's ``/internal/streams``, behind the metrics token."""

    answer: list[dict[str, Any]] = []

    def do_GET(self) -> None:
        allowed = self.headers.get("Authorization") == f"Bearer {settings.TRINITY_METRICS_TOKEN}"
        body = json.dumps(self.answer).encode() if allowed else b"{}"
        self.send_response(200 if allowed and self.path == "/internal/streams" else 403)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        return


@pytest.fixture
def embedded_gateway(settings: Any) -> Iterator[type[Gateway]]:
    """A gateway answering on loopback, and the web reading it there (no Redis)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.REDIS_URL = ""
    settings.TRINITY_GATEWAY_URL = f"http://127.0.0.1:{server.server_port}"
    try:
        yield Gateway
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_each_operator_sees_their_keys_streams_and_an_admin_all(
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    embedded_gateway: type[Gateway],
    streams: tuple[list[OpenStream], GatewayKey],
) -> None:
    open_now, mine = streams
    embedded_gateway.answer = [asdict(s) for s in open_now]
    (own,) = owner_client.get(URL).json()
    assert own == {
        "request_id": "r-2",
        "key_id": mine.pk,
        "key_name": "laptop",
        "key_prefix": mine.prefix,
        "owner": "owner",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "started_at": "2026-06-01T12:00:02+00:00",
        "served_by": "max-a",
    }
    assert [s["request_id"] for s in other_client.get(URL).json()] == ["r-1"]
    every = admin_client_api.get(URL).json()
    assert [(s["request_id"], s["key_name"], s["owner"]) for s in every] == [
        ("r-1", "theirs", "other"),
        ("r-2", "laptop", "owner"),
        ("r-3", None, None),
    ]


def test_it_is_a_503_saying_so_when_the_streams_cannot_be_read(
    owner_client: APIClient, settings: Any
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_URL = ""
    settings.TRINITY_GATEWAY_URL = f"http://127.0.0.1:{port}"
    response = owner_client.get(URL)
    assert response.status_code == 503
    assert response.json() == {
        "detail": "The open streams can't be read now: the gateway did not answer.",
        "code": "streams_unavailable",
    }


@pytest.mark.skipif(not ON_REDIS, reason="needs a real Redis: set REDIS_URL")
def test_on_redis_it_reads_what_every_gateway_process_published(
    owner_client: APIClient,
    admin_client_api: APIClient,
    streams: tuple[list[OpenStream], GatewayKey],
) -> None:
    open_now, _ = streams
    open_streams_publish(open_now[:2], process="gw-a:1")
    open_streams_publish(open_now[2:], process="gw-b:1")
    assert [s["request_id"] for s in owner_client.get(URL).json()] == ["r-2"]
    assert [s["request_id"] for s in admin_client_api.get(URL).json()] == ["r-1", "r-2", "r-3"]
