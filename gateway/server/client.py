"""The gateway's one HTTP client to the providers: aiohttp, one session per process.

Why not httpx, as the forwarder uses: its connection pool scans every connection on
each request and release, which at 200 concurrent streams was half of the gateway's
CPU (bench/gateway.py), and its per-request cost was half of what the gateway added
to a request. aiohttp's pool takes and returns a connection in constant time and its
parser is C. Nothing is decoded (the answer's bytes pass as the provider sent them,
so metering reads what it relays) and no header is added behind our back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import aiohttp

# The CLIs stream: an answer may take minutes; only a silent connection fails.
TIMEOUT: Final = aiohttp.ClientTimeout(total=None, connect=10, sock_connect=10, sock_read=600)
# Idle upstream connections are kept this long (a provider closes its own later).
KEEPALIVE_SECONDS: Final = 60.0


class Unreachable(Exception):
    """The provider could not be reached, or dropped the connection before answering."""


class UpstreamClient:
    """One pooled aiohttp session; ``start``/``close`` run on the gateway's loop."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS, ttl_dns_cache=300
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=TIMEOUT,
            auto_decompress=False,
            trust_env=False,
            # Only the headers the gateway sets: no User-Agent, Accept or encoding of
            # aiohttp's own.
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(
        self, url: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> aiohttp.ClientResponse:
        """The provider's answer, its headers read and its body still to stream.

        A connection the provider closed while it sat idle in the pool is retried once
        on a fresh one (the request never reached it); any other failure raises
        Unreachable."""
        assert self._session is not None  # noqa: S101 - started with the app
        sent = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        for attempt in (1, 2):
            try:
                return await self._session.post(url, headers=sent, data=body, allow_redirects=False)
            except aiohttp.ServerDisconnectedError as exc:
                if attempt == 2:
                    raise Unreachable(type(exc).__name__) from exc
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise Unreachable(type(exc).__name__) from exc
        raise Unreachable("unreachable")  # pragma: no cover - the loop returns or raises


def chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The answer's body as it arrives (transfer framing removed, nothing decoded)."""
    return response.content.iter_any()
