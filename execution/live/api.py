"""Live turns over REST: a turn's event stream, a streamed task or chat, and cancel."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent
from execution import services
from execution.live.sse import MEDIA_TYPE, sse_response
from execution.models import Execution
from execution.selectors import execution_get_visible
from trinity.errors import InvalidInput, TooManyTurns

# A resumed stream names the last event it has: a seq, never more than a turn holds.
SEQ_MAX = 10**9
EVENT_KINDS = [
    "turn", "sent", "text", "tool_call", "tool_result", "truncated",
    "refused", "walking", "served", "committed", "parked", "end",
]  # fmt: skip
# One event of the stream as OpenAPI describes a text/event-stream answer.
SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "the event's seq (Last-Event-ID resumes after it)"},
        "event": {"type": "string", "enum": EVENT_KINDS},
        "data": {
            "type": "string",
            "description": "the event's fields, JSON (docs/flows/live-turns.md)",
        },
    },
    "required": ["id", "event", "data"],
}
TURN_STREAM = {(200, MEDIA_TYPE): OpenApiResponse(SSE_EVENT_SCHEMA)}


class EventStreamRenderer(BaseRenderer):
    """Lets a client ask for ``text/event-stream`` (EventSource does); the stream
    itself is the view's own response. An error is JSON whatever was asked."""

    media_type = MEDIA_TYPE
    format = "sse"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return json.dumps(data).encode()


class StreamingApiView(APIView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # A stream is the view's own response (DRF passes it through untouched).
        if isinstance(response, Response) and isinstance(
            getattr(request, "accepted_renderer", None), EventStreamRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def _after(request: Request) -> int:
    """The last event the client has: ``Last-Event-ID`` (EventSource's reconnect) or
    ``?after=``; 0 for the whole stream."""
    raw = request.headers.get("Last-Event-ID") or request.query_params.get("after") or "0"
    if not raw.isdigit() or int(raw) > SEQ_MAX:
        raise InvalidInput("Give the seq of the last event received (0 or more).", field="after")
    return int(raw)


class ExecutionEventsApi(StreamingApiView):
    """A turn's events as Server-Sent Events: live while it runs, replayed once it
    ended; closes after its ``end`` (or ``parked``). Resumable: ``Last-Event-ID`` (or
    ``?after=<seq>``) starts after that event."""

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="resume after this seq")],
        responses=TURN_STREAM,
    )
    def get(self, request: Request, pk: str) -> HttpResponseBase:
        after = _after(request)
        execution = execution_get_visible(user=request.user, pk=pk)
        return sse_response(request._request, str(execution.pk), after)


class _StreamedTurns:
    """The streamed turns this process runs, at most TRINITY_WEB_STREAMED_TURNS: each
    holds a thread and a database connection for its turn (a capacity of the process,
    as its request slots are; nothing about any turn's outcome is decided here)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def take(self) -> None:
        cap = settings.TRINITY_WEB_STREAMED_TURNS
        with self._lock:
            if self.running >= cap:
                raise TooManyTurns(
                    f"This web process is running its cap of {cap} streamed turns; retry "
                    "shortly, or send the turn with async: true and follow "
                    "GET /api/executions/{id}/events.",
                    retry_after=STREAMED_RETRY_AFTER_SECONDS,
                )
            self.running += 1

    def give(self) -> None:
        with self._lock:
            self.running -= 1


streamed_turns = _StreamedTurns()
STREAMED_RETRY_AFTER_SECONDS = 5


def streamed_turn(request: Request, agent: Agent, values: dict[str, Any]) -> HttpResponseBase:
    """Start the turn in a thread of this process and answer its event stream. The
    turn runs to its end whether or not the client stays (as a sync turn would)."""
    streamed_turns.take()
    try:
        execution = services.execution_create(agent=agent, **values)
        services.execution_admit(execution=execution, record_refusal=False)
        thread = threading.Thread(
            target=_turn_run, args=(execution, agent), name=f"turn-{execution.pk}"
        )
        thread.start()
    except BaseException:
        streamed_turns.give()
        raise
    return sse_response(request._request, str(execution.pk), 0)


def _turn_run(execution: Execution, agent: Agent) -> None:
    try:
        services.execution_dispatch(execution=execution, agent=agent)
    finally:
        streamed_turns.give()
        connection.close()
