"""The gateway's open requests, as the web reads them: from Redis, where every gateway
process publishes its own each second (``gateway/open_streams.py``); in the embedded
default (no Redis, one gateway process) from that process itself
(``GET /internal/streams``, the metrics token as Bearer)."""

from __future__ import annotations

import json
import logging

import httpx
from django.conf import settings

from gateway.open_streams import OpenStream, open_streams_read

logger = logging.getLogger(__name__)


class StreamsUnavailable(Exception):
    """The open streams could not be read (the gateway is down, Redis unreachable)."""


def open_streams_list() -> list[OpenStream]:
    """Every open gateway request, oldest first. Raises StreamsUnavailable."""
    if settings.REDIS_URL:
        from django_redis import get_redis_connection
        from redis.exceptions import RedisError

        try:
            return open_streams_read(get_redis_connection("default"))
        except RedisError as exc:
            raise StreamsUnavailable("Redis could not be read") from exc
    try:
        answer = httpx.get(
            settings.TRINITY_GATEWAY_URL + "/internal/streams",
            headers={"Authorization": f"Bearer {settings.TRINITY_METRICS_TOKEN}"},
            timeout=2.0,
            trust_env=False,
        )
        answer.raise_for_status()
        return [OpenStream(**row) for row in json.loads(answer.content)]
    except (httpx.HTTPError, ValueError, TypeError) as exc:
        logger.warning("gateway streams unreadable: %s", type(exc).__name__)
        raise StreamsUnavailable("the gateway did not answer") from exc
