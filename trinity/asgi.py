"""The web process's ASGI application: gunicorn's uvicorn workers
(deploy/gunicorn.conf.py) and `make run`'s uvicorn serve this.

Under ASGI Django runs each request's sync code (middleware, DRF views, the ORM) on a
thread of that request's own (asgiref gives every request a ThreadSensitiveContext
with a one-thread executor), while the event loop carries the sockets. A sync turn
still holds its thread, and its database connection, for as long as it runs; an
event stream (``text/event-stream``, a StreamingHttpResponse over an async iterator)
holds neither once its headers are sent: the loop feeds its body.

asgiref itself puts no bound on those threads (it has not read ASGI_THREADS since
3.5.3), so ``RequestSlots`` does, the way gthread's ``threads`` did: at most
WEB_THREADS requests of this process are inside Django at once; the next waits on the
loop, holding no thread, until one finishes or starts streaming.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trinity.settings")

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The same variable, default and bounds gunicorn's gthread workers read for their
# threads before (deploy/gunicorn.conf.py).
WEB_THREADS_DEFAULT = 32
WEB_THREADS_RANGE = (2, 256)


def web_threads(environ: MutableMapping[str, str]) -> int:
    """WEB_THREADS from ``environ``: requests inside Django at once, per process.
    Raises RuntimeError naming the variable on a value that is not an integer in range."""
    raw = environ.get("WEB_THREADS", "").strip()
    if raw == "":
        return WEB_THREADS_DEFAULT
    try:
        value = int(raw)
    except ValueError:
        raise RuntimeError(f"WEB_THREADS={raw!r} is not an integer") from None
    low, high = WEB_THREADS_RANGE
    if not low <= value <= high:
        raise RuntimeError(f"WEB_THREADS={value} is outside {low}..{high}")
    return value


def _is_event_stream(message: Message) -> bool:
    for name, value in message.get("headers", ()):
        if bytes(name).lower() == b"content-type":
            return bytes(value).split(b";", 1)[0].strip().lower() == b"text/event-stream"
    return False


class RequestSlots:
    """An ASGI wrapper: at most ``slots`` HTTP requests inside ``app`` at once. A
    request waits (on the loop, in order) for a slot and gives it back when its
    response is complete, or as soon as it starts answering ``text/event-stream``.
    Lifespan and other scopes pass straight through."""

    def __init__(self, app: ASGIApp, *, slots: int) -> None:
        self.app = app
        self.slots = slots
        self._free = asyncio.Semaphore(slots)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._free.acquire()
        held = True

        async def send_then_free(message: Message) -> None:
            nonlocal held
            if held and message["type"] == "http.response.start" and _is_event_stream(message):
                held = False
                self._free.release()
            await send(message)

        try:
            await self.app(scope, receive, send_then_free)
        finally:
            if held:
                self._free.release()


def _warn_about_an_unnamed_proxy() -> None:
    """Once per web process, at startup: behind a proxy nobody named, every client
    shares the proxy's address (and its sign-in counts)."""
    import logging

    from django.conf import settings

    from trinity.authentication import proxy_warning

    warning = proxy_warning(https=settings.TRINITY_HTTPS, trusted=settings.TRINITY_TRUSTED_PROXIES)
    if warning:
        logging.getLogger("trinity.asgi").warning(warning)


application = RequestSlots(get_asgi_application(), slots=web_threads(os.environ))

_warn_about_an_unnamed_proxy()
