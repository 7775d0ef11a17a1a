"""Reading a turn's Server-Sent Events as a client does (tests of live turns)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class Event:
    seq: int
    kind: str
    data: dict[str, Any]
    # When the client had it (time.monotonic()).
    at: float


def sse_events(chunks: Iterable[bytes]) -> Iterator[Event]:
    """The events of an SSE body, each as soon as its blank line arrived."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            fields: dict[str, str] = {}
            for line in block.decode().splitlines():
                if line.startswith(":") or ": " not in line:
                    continue
                name, value = line.split(": ", 1)
                fields[name] = value
            if "id" in fields and "data" in fields:
                yield Event(
                    int(fields["id"]), fields["event"], json.loads(fields["data"]), time.monotonic()
                )


def body_events(response: Any) -> Iterator[Event]:
    """The events of a test client's streamed answer (a ``StreamingHttpResponse``)."""
    assert response.status_code == 200, getattr(response, "content", b"")[:500]
    assert response["Content-Type"].startswith("text/event-stream")
    return sse_events(response.streaming_content)


def kinds(events: Iterable[Event]) -> list[str]:
    return [e.kind for e in events]


def walk_of(events: Iterable[Event]) -> list[tuple[str, str]]:
    """The platform's events of a turn, with the rung each names."""
    named = []
    for e in events:
        if e.kind in ("sent", "refused", "walking", "served"):
            rung = e.data.get("on") or e.data.get("by") or e.data.get("to") or {}
            named.append((e.kind, rung.get("name", "")))
        elif e.kind in ("turn", "committed", "end"):
            named.append((e.kind, ""))
    return named
