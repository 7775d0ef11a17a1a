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
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from agent_server.relay import answer_json
from gateway import metrics
from gateway.catalog import ANTHROPIC, PATHS
from gateway.limits import Limits, MemoryLimits, RedisLimits
from gateway.open_streams import StreamBook
from gateway.server.admission import admit
from gateway.server.background import Background
from gateway.server.client import UpstreamClient
from gateway.server.exchange import Call, Revoked
from gateway.server.keybook import KeyBook
from gateway.server.models_list import models_answer
from gateway.server.platform_routes import metrics_answer, streams_answer
from gateway.server.recording import Recorder
from gateway.server.route import Router, SessionCache, answer_fail, route
from gateway.server.shapes import answer_error
from gateway.server.upstream import Upstreams
from gateway.server.usage import usage_row
from subscriptions.leases import lease_release
from trinity import clock

logger = logging.getLogger("gateway")

POOL_THREADS: Final = 8


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
        # key id -> the tasks serving its open requests and their calls (a revocation
        # or the owner's deactivation cancels them, saying why)
        self.open: dict[int, dict[asyncio.Future[Any], Call]] = {}
        self.background = Background(
            keys=self.keys,
            streams=self.streams,
            redis=self.redis,
            pool=self.pool,
            on_revoked=self._end_streams,
        )

    async def pool(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` (the ORM, the cache) in the thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: _db_call(fn, args, kwargs))

    # --- lifespan -----------------------------------------------------------------

    async def startup(self) -> None:
        client = UpstreamClient()
        await client.start()
        self.router = Router(client, self.upstreams, self.pool, self.sessions)
        await self.background.start()
        self.recorder.start()
        logger.info("gateway ready: upstream %s", self.upstreams.anthropic)

    async def shutdown(self) -> None:
        self.background.stop()
        await self.recorder.stop()
        if self.router is not None:
            await self.router.client.close()
        self.executor.shutdown(wait=False)

    def _end_streams(self, key_id: int, why: str) -> None:
        for task, call in self.open.pop(key_id, {}).items():
            call.ended_why = why
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
            await metrics_answer(scope, send)
        elif path == "/internal/streams" and method == "GET":
            await streams_answer(self.streams, scope, send)
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

    async def _proxy(self, scope: dict[str, Any], receive: Any, send: Any, provider: str) -> None:
        """One proxied request: admitted, routed, answered, then recorded."""
        started = time.perf_counter()
        admitted = await admit(self, scope, receive, send, provider)
        if admitted is None:
            return
        call, key = admitted
        metrics.OPEN.inc()
        work = asyncio.ensure_future(self._serve(call, key.name))
        self.open.setdefault(call.key_id, {})[work] = call
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            if not work.cancelled():
                work.cancel()  # the server itself is stopping
                raise
            await self._revoked(call)
        finally:
            self.open.get(call.key_id, {}).pop(work, None)
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
        if not call.started_response:
            with contextlib.suppress(Exception):
                await answer_error(call.send, call.provider, 401, call.ended_why)
            call.status = 401

    def _after(self, call: Call, key: Any, started: float) -> None:
        """Queue what the request leaves behind (usage, readings, key spend, the
        limits' release); nothing here is awaited by the client."""
        now = clock.now()
        if call.sent_at:
            metrics.OVERHEAD.observe(call.sent_at - started)
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
        for plan in call.leases:  # a capped plan's slot, back for the next request
            task = asyncio.ensure_future(
                self.pool(lease_release, subscription_id=plan, holder=call.request_id)
            )
            task.add_done_callback(_log_failure)
        if not key.limits.any:
            return  # nothing of it is open in the limits
        task = asyncio.ensure_future(
            self.limits.release(key_id=call.key_id, request_id=call.request_id)
        )
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("gateway: releasing a request's slot failed: %s", task.exception())


def _db_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn`` on this thread's database connection; a connection the server dropped
    (a restart, an idle timeout) is closed and the call made once more."""
    try:
        return fn(*args, **kwargs)
    except (InterfaceError, OperationalError):
        connection.close()
        return fn(*args, **kwargs)
