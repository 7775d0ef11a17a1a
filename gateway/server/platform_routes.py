"""What the gateway answers the platform itself, never a client: its Prometheus metrics
and its open requests (the web's Gateway page in the embedded default, which has no
Redis to read them from). Both want the platform's metrics token as Bearer."""

from __future__ import annotations

import hmac
from typing import Any

import orjson
from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agent_server.relay import answer_json, presented
from gateway import metrics
from gateway.open_streams import StreamBook


def from_platform(scope: dict[str, Any]) -> bool:
    """The caller presents the metrics token (compared in constant time)."""
    expected: str = settings.TRINITY_METRICS_TOKEN
    return hmac.compare_digest(presented(scope["headers"]).encode(), expected.encode())


async def metrics_answer(scope: dict[str, Any], send: Any) -> None:
    if not from_platform(scope):
        await answer_json(send, 401, {"detail": "metrics need the metrics token"})
        return
    await _answer(send, CONTENT_TYPE_LATEST.encode(), generate_latest(metrics.REGISTRY))


async def streams_answer(streams: StreamBook, scope: dict[str, Any], send: Any) -> None:
    if not from_platform(scope):
        await answer_json(send, 401, {"detail": "streams need the metrics token"})
        return
    await _answer(send, b"application/json", orjson.dumps(streams.listed()))


async def _answer(send: Any, content_type: bytes, payload: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", content_type)],
        }
    )
    await send({"type": "http.response.body", "body": payload})
