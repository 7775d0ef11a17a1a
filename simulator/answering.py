"""How the simulator answers an API request, whichever provider's: counted in flight,
held by the injected latency, then recorded in the request log.

Handlers read the request body (the only await before the work, besides injected
latency), then check and spend quota synchronously. The event loop runs one
handler's synchronous part at a time, so two requests can never both pass a check
that only one of them should: no lock is needed, and none may be added around an
``await`` that would let another request interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from simulator.messages import new_request_id
from simulator.state import AuthKind, Credential, RequestRecord, Simulator

logger = logging.getLogger("simulator")

# What both providers' usage endpoints answer a caller polling them too often.
USAGE_RATE_LIMITED = "Rate limited. Please try again later."


def bearer_token(request: Request) -> str | None:
    """The request's bearer token (None: no ``Authorization: Bearer`` header)."""
    value = request.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Outcome:
    """What a handler decided, kept for the request log and the log line."""

    def __init__(self, request: Request, *, stream: bool = False) -> None:
        self.method = request.method
        self.path = request.url.path
        self.credential: Credential | None = None
        self.model: str | None = None
        self.stream = stream
        # How many messages the request carried: a resumed conversation sends its history.
        self.messages = 0
        self.request_id = new_request_id()


class Answering:
    """The answering state one app shares across its routes: the world ``sim``, the
    answers the injected latency holds, and how many API requests are in flight."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        # Held answers wait on this event as well as on their delay: a latency change
        # releases every answer the old latency was holding, so a test that made the
        # upstream hang can end the hang instead of waiting it out.
        self._release: asyncio.Event | None = None
        self.in_flight = 0

    async def answered(
        self, request: Request, serve: Callable[[bytes, Outcome], Response]
    ) -> Response:
        """An API request's common steps: counted in flight, the injected latency, the
        body read (the only await), then ``serve``, synchronous from check to spend."""
        outcome = Outcome(request)
        async with self._counted():
            await self._inject_latency(usage=False)
            raw = await request.body()
            return self.finish(outcome, serve(raw, outcome))

    async def usage_answered(
        self, request: Request, serve: Callable[[Outcome], Response]
    ) -> Response:
        """A usage endpoint's request: counted in flight, the injected latency (the
        usage scope's too), the credential's own usage delay, then ``serve``."""
        outcome = Outcome(request)
        async with self._counted():
            await self._inject_latency(usage=True)
            await self._credential_delay(request)
            return self.finish(outcome, serve(outcome))

    def finish(self, outcome: Outcome, response: Response, *, quiet: bool = False) -> Response:
        """``response``, with its request id, recorded in the request log and logged
        (``quiet``: at debug level)."""
        sim, cred = self.sim, outcome.credential
        auth_kind: AuthKind = cred.kind if cred else "none"
        label = cred.label if cred else None
        response.headers["request-id"] = outcome.request_id
        sim.record(
            RequestRecord(
                at=sim.clock.now(),
                request_id=outcome.request_id,
                method=outcome.method,
                path=outcome.path,
                auth_kind=auth_kind,
                credential=label,
                model=outcome.model,
                status=response.status_code,
                stream=outcome.stream,
                messages=outcome.messages,
            )
        )
        logger.log(
            logging.DEBUG if quiet else logging.INFO,
            "%s %s %s credential=%s model=%s",
            outcome.method,
            outcome.path,
            response.status_code,
            label or "-",
            outcome.model or "-",
        )
        return response

    def release_held(self) -> None:
        """Let every answer the injected latency holds go now."""
        if self._release is not None:
            self._release.set()
        self._release = None

    def latency_view(self) -> dict[str, Any]:
        """The injected latency and the API requests in flight (the control API)."""
        sim = self.sim
        return {
            "all_ms": sim.latency_all_ms,
            "usage_ms": sim.latency_usage_ms,
            "in_flight": self.in_flight,
        }

    async def _inject_latency(self, *, usage: bool) -> None:
        sim = self.sim
        delay_ms = sim.latency_all_ms + (sim.latency_usage_ms if usage else 0)
        if delay_ms:
            if self._release is None:
                self._release = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._release.wait(), delay_ms / 1000)

    @contextlib.asynccontextmanager
    async def _counted(self) -> AsyncIterator[None]:
        """Count an API request until it is answered (and recorded) or abandoned."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    async def _credential_delay(self, request: Request) -> None:
        """A registered credential's own usage delay (a provider hanging for it)."""
        token = bearer_token(request)
        cred = self.sim.credentials.get(token) if token else None
        if cred is not None and cred.usage_delay_ms:
            await asyncio.sleep(cred.usage_delay_ms / 1000)
