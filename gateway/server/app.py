"""The gateway's ASGI app: the routes, a request's admission (key, input, limits), and
the process's lifespan (its pooled client, thread pool, key poll and writers).

Routes: ``POST /v1/messages``, ``POST /v1/messages/count_tokens`` (Anthropic),
``POST /v1/responses`` (OpenAI Responses), ``GET /v1/models``; ``GET /healthz``;
``GET /metrics`` and ``GET /internal/streams`` for the platform (its metrics token
as Bearer). Anything else answers a provider-shaped 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, Final

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agent_server.relay import answer_json, presented
from gateway import metrics
from gateway.catalog import ANTHROPIC, PATHS
from gateway.limits import Limits, MemoryLimits, RedisLimits
from gateway.open_streams import StreamBook
from gateway.server.admission import admit
from gateway.server.client import UpstreamClient
from gateway.server.exchange import Call, Revoked
from gateway.server.keybook import KeyBook, read_changed
from gateway.server.models_list import models_answer
from gateway.server.recording import Recorder
from gateway.server.route import Router, SessionCache, answer_fail, route
from gateway.server.shapes import answer_error
from gateway.server.upstream import Upstreams
from gateway.server.usage import usage_row
from trinity import clock

logger = logging.getLogger("gateway")

POOL_THREADS: Final = 8
STREAMS_PUBLISH_SECONDS: Final = 1.0


# Connections to Redis the process opens at most; more concurrent requests wait for one
# (redis-py's plain pool raises past its size instead).
REDIS_CONNECTIONS: Final = 256


def _redis() -> Any | None:
    if not settings.REDIS_URL:
        return None
    import redis.asyncio

    pool = redis.asyncio.BlockingConnectionPool.from_url(
        settings.REDIS_URL, max_connections=REDIS_CONNECTIONS, timeout=10
    )
    return redis.asyncio.Redis(connection_pool=pool)


class GatewayApp:
    """One gateway process's state, and its ASGI entry point."""

    def __init__(self) -> None:
        self.keys = KeyBook()
        self.redis = _redis()
        self.limits: Limits = RedisLimits(self.redis) if self.redis is not None else MemoryLimits()
        self.streams = StreamBook()
        self.executor = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="gateway-db")
        self.recorder = Recorder(self.pool, self.limits.flush)
        self.sessions = SessionCache(float(settings.TRINITY_GATEWAY_EVIDENCE_SECONDS))
        self.upstreams = Upstreams(
            anthropic=settings.TRINITY_ANTHROPIC_BASE_URL,
            codex=settings.TRINITY_CODEX_BASE_URL,
            openai=settings.TRINITY_OPENAI_BASE_URL,
        )
        self.router: Router | None = None
        self.max_body: int = settings.TRINITY_GATEWAY_MAX_BODY_BYTES
        # key id -> the tasks serving its open requests (a revocation cancels them)
        self.open: dict[int, set[asyncio.Task[Any]]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._publisher: asyncio.Task[None] | None = None

    async def pool(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` (the ORM, the cache) in the thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: _db_call(fn, args, kwargs))

    # --- lifespan -----------------------------------------------------------------

    async def startup(self) -> None:
        client = UpstreamClient()
        await client.start()
        self.router = Router(client, self.upstreams, self.pool, self.sessions)
        await self.poll()
        self.recorder.start()
        self._poller = asyncio.create_task(self._poll_forever())
        if self.redis is not None:
            self._publisher = asyncio.create_task(self._publish_forever())
        logger.info("gateway ready: upstream %s", self.upstreams.anthropic)

    async def shutdown(self) -> None:
        for task in (self._poller, self._publisher):
            if task is not None:
                task.cancel()
        await self.recorder.stop()
        if self.router is not None:
            await self.router.client.close()
        self.executor.shutdown(wait=False)

    async def poll(self) -> None:
        """Take every key changed since the last poll; end a revoked key's requests."""
        changed, newest = await self.pool(read_changed, self.keys.since)
        self.keys.apply(changed, newest, self._end_streams)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(settings.TRINITY_GATEWAY_POLL_SECONDS)
            try:
                await self.poll()
            except Exception:
                logger.warning("gateway: key poll failed", exc_info=True)

    async def _publish_forever(self) -> None:
        """This process's open requests, for the panel, every second."""
        assert self.redis is not None  # noqa: S101 - started only with Redis
        while True:
            try:
                await self.streams.publish(self.redis)
            except Exception:
                logger.warning("gateway: publishing open streams failed", exc_info=True)
            await asyncio.sleep(STREAMS_PUBLISH_SECONDS)

    def _end_streams(self, key_id: int) -> None:
        for task in self.open.pop(key_id, set()):
            task.cancel()

    # --- ASGI ---------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/healthz":
            await answer_json(send, 200, {"status": "ok"})
        elif path == "/metrics" and method == "GET":
            await self._metrics(scope, send)
        elif path == "/internal/streams" and method == "GET":
            await self._streams(scope, send)
        elif path == "/v1/models" and method == "GET":
            await models_answer(self, scope, send)
        elif path in PATHS and method == "POST":
            await self._proxy(scope, receive, send, PATHS[path])
        else:
            provider = ANTHROPIC if not path.startswith("/v1/responses") else "openai-codex"
            status = 405 if path in PATHS else 404
            metrics.REFUSED.labels("not_served").inc()
            await answer_error(send, provider, status, f"the gateway serves no {method} {path}")

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    logger.exception("gateway: startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _platform(self, scope: dict[str, Any]) -> bool:
        """The platform's own caller: the metrics token as Bearer."""
        expected: str = settings.TRINITY_METRICS_TOKEN
        return hmac.compare_digest(presented(scope["headers"]).encode(), expected.encode())

    async def _metrics(self, scope: dict[str, Any], send: Any) -> None:
        if not self._platform(scope):
            await answer_json(send, 401, {"detail": "metrics need the metrics token"})
            return
        payload = generate_latest(metrics.REGISTRY)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE_LATEST.encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _streams(self, scope: dict[str, Any], send: Any) -> None:
        if not self._platform(scope):
            await answer_json(send, 401, {"detail": "streams need the metrics token"})
            return
        streams = self.streams.listed()
        payload = json.dumps([asdict(s) for s in streams]).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _proxy(self, scope: dict[str, Any], receive: Any, send: Any, provider: str) -> None:
        """One proxied request: admitted, routed, answered, then recorded."""
        started = time.perf_counter()
        admitted = await admit(self, scope, receive, send, provider)
        if admitted is None:
            return
        call, key = admitted
        metrics.OPEN.inc()
        work = asyncio.ensure_future(self._serve(call, key.name))
        self.open.setdefault(call.key_id, set()).add(work)
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            if not work.cancelled():
                work.cancel()  # the server itself is stopping
                raise
            await self._revoked(call)
        finally:
            self.open.get(call.key_id, set()).discard(work)
            self.streams.remove(call.request_id)
            metrics.OPEN.dec()
            try:
                self._after(call, key, started)
            except Exception:  # the answer went out already: a bookkeeping bug must not cut it
                logger.exception("gateway: recording request %s failed", call.request_id)

    async def _serve(self, call: Call, key_name: str) -> None:
        assert self.router is not None  # noqa: S101 - set at startup
        try:
            failed = await route(self.router, call, key_name=key_name)
        except Revoked:
            return
        if failed is not None:
            await answer_fail(call, failed)

    async def _revoked(self, call: Call) -> None:
        call.revoked = True
        if not call.started_response:
            with contextlib.suppress(Exception):
                await answer_error(call.send, call.provider, 401, "this gateway key was revoked")
            call.status = 401

    def _after(self, call: Call, key: Any, started: float) -> None:
        """Queue what the request leaves behind (usage, readings, key spend, the
        limits' release); nothing here is awaited by the client."""
        now = clock.now()
        row = usage_row(call, now=now, started=started)
        self.recorder.usage.append(row)
        for subscription_id, headers in call.readings:
            self.recorder.reading(subscription_id, headers, now)
        if row["billed_usd"]:
            self.recorder.spend(call.provider, row["billed_usd"])
        tokens = sum(
            row[f"{kind}_tokens"] for kind in ("input", "output", "cache_read", "cache_write")
        )
        self.limits.add(key_id=call.key_id, tokens=tokens, usd=float(row["list_usd"]), now=now)
        if not key.limits.any:
            return  # nothing of it is open in the limits
        task = asyncio.ensure_future(
            self.limits.release(key_id=call.key_id, request_id=call.request_id)
        )
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("gateway: releasing a request's limits failed: %s", task.exception())


def _db_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn`` on this thread's database connection; a connection the server dropped
    (a restart, an idle timeout) is closed and the call made once more."""
    try:
        return fn(*args, **kwargs)
    except (InterfaceError, OperationalError):
        connection.close()
        return fn(*args, **kwargs)
