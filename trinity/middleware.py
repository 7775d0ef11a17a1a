"""Middleware of the web process's own."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections
from django.http import HttpRequest, HttpResponseBase


class EventStreamReleasesConnections:
    """A ``text/event-stream`` response gives its database connections back as soon
    as the view returns it, instead of at the end of the stream.

    Django closes a request's connections when the response is closed, which for an
    event stream is when the stream ends, minutes later. Under ASGI the stream's body
    then comes from the event loop and holds no thread, so without this every open
    stream would still hold the connection its view's authentication and lookups
    opened: a hundred watchers, a hundred idle Postgres backends, the API waiting
    behind them. Whatever the stream's iterator reads later opens (and should close)
    its own. A connection inside a transaction (a test's, or an ``atomic`` around the
    view) is not this middleware's to close and is left as it is.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        content_type = response.headers.get("Content-Type", "")
        if response.streaming and content_type.split(";", 1)[0].strip() == "text/event-stream":
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()
        return response
