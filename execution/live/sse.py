"""A turn's events as Server-Sent Events (``GET /api/executions/{id}/events``, and the
answer of a task or chat sent with ``stream: true``).

Each event is ``id: <seq>``, ``event: <kind>``, ``data: <json>``; the stream closes
after the turn's ``end`` (or ``parked``) and sends a keepalive comment while nothing
happens. A finished turn replays the same events, then closes.

Under ASGI (uvicorn workers, ``deploy/gunicorn.conf.py``) the body is an async
iterator: an open stream holds no thread while it waits, it is woken by the
process's one poller (``execution/live/hub.py``). Under WSGI (the test server,
``runserver``) Django would read an async body to its end before sending any of it,
so there the body is a plain generator that polls, holding its thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.http import HttpRequest, StreamingHttpResponse

from execution.live.events import FINAL_KINDS
from execution.live.hub import hub_for_loop
from execution.live.store import PAGE, ended_unannounced, events_cached, events_kept
from trinity import clock

KEEPALIVE_SECONDS = 15.0
# How often a stream with nothing new asks the row whether the turn ended unannounced.
STATUS_SECONDS = 3.0
POLL_SECONDS = 0.2
# What a client that lost the stream waits before reconnecting (EventSource's retry).
RETRY_MS = 2000
MEDIA_TYPE = "text/event-stream"


def sse_format(event: dict[str, Any]) -> bytes:
    data = json.dumps(event["data"], separators=(",", ":"), ensure_ascii=False)
    return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {data}\n\n".encode()


def _next(execution_id: str, after: int, *, check_status: bool) -> list[dict[str, Any]]:
    """The events after ``after``: the cache's; with ``check_status`` also the
    database's, or the ``end`` of a turn that finished without writing one."""
    events = events_cached(execution_id, after)
    if events or not check_status:
        return events
    events = events_kept(execution_id, after)
    if events:
        return events
    ended = ended_unannounced(execution_id, after, now=clock.now())
    return [ended] if ended is not None else []


def _next_closing(execution_id: str, after: int, *, check_status: bool) -> list[dict[str, Any]]:
    """``_next`` that gives its database connection back (to the pool, or closed): an
    open stream holds none while it waits (a hundred streams would hold a hundred; the
    embedded default's cache is the database too)."""
    try:
        return _next(execution_id, after, check_status=check_status)
    finally:
        connection.close()


def _sync_body(execution_id: str, after: int) -> Iterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    check, last_sent, last_status = True, time.monotonic(), time.monotonic()
    while True:
        events = _next(execution_id, after, check_status=check)
        for event in events:
            yield sse_format(event)
            after = event["seq"]
            if event["kind"] in FINAL_KINDS:
                return
        now = time.monotonic()
        if check:
            last_status = now
        if events:
            # A full page: read on at once, the database's too (a replay).
            check, last_sent = len(events) >= PAGE, now
            continue
        if now - last_sent >= KEEPALIVE_SECONDS:
            last_sent = now
            yield b": keepalive\n\n"
        time.sleep(POLL_SECONDS)
        check = time.monotonic() - last_status >= STATUS_SECONDS


async def _async_body(execution_id: str, after: int) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    hub = hub_for_loop()
    read = sync_to_async(_next_closing)
    check, last_sent = True, time.monotonic()
    while True:
        events = await read(execution_id, after, check_status=check)
        for event in events:
            yield sse_format(event)
            after = event["seq"]
            if event["kind"] in FINAL_KINDS:
                return
        if events:
            check, last_sent = len(events) >= PAGE, time.monotonic()
            continue
        # Woken when the turn publishes past ``after``; else, after a while, the row
        # is asked whether the turn ended without a word.
        check = not await hub.wait(execution_id, after, timeout=STATUS_SECONDS)
        if time.monotonic() - last_sent >= KEEPALIVE_SECONDS:
            last_sent = time.monotonic()
            yield b": keepalive\n\n"


def sse_response(request: HttpRequest, execution_id: str, after: int) -> StreamingHttpResponse:
    """The stream of ``execution_id``'s events after ``after``."""
    body: Iterator[bytes] | AsyncIterator[bytes]
    if isinstance(request, ASGIRequest):
        body = _async_body(execution_id, after)
    else:
        body = _sync_body(execution_id, after)
    response = StreamingHttpResponse(body, content_type=MEDIA_TYPE)
    response["Cache-Control"] = "no-cache"
    # Proxies that buffer (nginx) pass each event on at once.
    response["X-Accel-Buffering"] = "no"
    response["X-Execution-Id"] = execution_id
    return response
