"""The gateway's open requests, for the panel: each process keeps its own in memory
(``StreamBook``) and publishes them to Redis every second under a key of its own that
expires when the process stops publishing; the web reads every process's
(``open_streams_read``). Nothing on a request's path waits for Redis for this."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

PREFIX: Final = "gw:streams:"
# A process that stopped publishing drops out of the list this long after.
TTL_SECONDS: Final = 5


@dataclass(frozen=True, slots=True)
class OpenStream:
    """One open request, as the panel lists it (no secret in it)."""

    request_id: str
    key_id: int
    owner_id: int
    provider: str
    model: str
    started_at: str
    served_by: str


class StreamBook:
    """This process's open requests."""

    def __init__(self) -> None:
        self.open: dict[str, OpenStream] = {}
        self.name = f"{PREFIX}{socket.gethostname()}:{os.getpid()}"

    def add(self, stream: OpenStream) -> None:
        self.open[stream.request_id] = stream

    def served(self, request_id: str, name: str) -> None:
        """The plan or key now serving an open request."""
        stream = self.open.get(request_id)
        if stream is not None:
            self.open[request_id] = replace(stream, served_by=name)

    def remove(self, request_id: str) -> None:
        self.open.pop(request_id, None)

    def listed(self) -> list[OpenStream]:
        return sorted(self.open.values(), key=lambda s: s.started_at)

    async def publish(self, client: Any) -> None:
        """Write this process's list to Redis (``redis.asyncio``), to expire unless
        published again."""
        # orjson writes the dataclasses itself, in C: the loop is not held for it.
        payload = orjson.dumps(list(self.open.values()))
        await client.set(self.name, payload, ex=TTL_SECONDS)


def open_streams_read(client: Any) -> list[OpenStream]:
    """Every gateway process's open requests (a synchronous Redis client: the web)."""
    found: list[OpenStream] = []
    for name in client.scan_iter(match=PREFIX + "*", count=100):
        raw = client.get(name)
        try:
            found += [OpenStream(**row) for row in json.loads(raw or "[]")]
        except (TypeError, ValueError):
            continue
    return sorted(found, key=lambda s: s.started_at)
