"""The only code that talks to the providers' usage endpoints: one module per provider.

Base URLs come from settings at call time (tests point them at the simulator). A
collector never raises for what the provider or the network did: every outcome is a
``Collected`` (a ``Reading``, and when to ask again), and none of them carries the token.
"""

from __future__ import annotations

from datetime import datetime

import httpx

from subscriptions.headroom.collectors import anthropic, openai_codex
from subscriptions.headroom.collectors.common import Collected
from subscriptions.models import Provider
from trinity.crypto import Secret


def http_client(*, timeout: float, max_connections: int) -> httpx.Client:
    """A pooled client for one sweep or one refresh; ``timeout`` bounds each probe."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        follow_redirects=False,
    )


def read(
    *, provider: str, token: Secret, client: httpx.Client, now: datetime, label: str = ""
) -> Collected:
    """Read one subscription's usage, and when the usage endpoint said to ask again
    (a Retry-After). Raises ValueError only for an unknown provider."""
    if provider == Provider.ANTHROPIC:
        return anthropic.read(token=token, client=client, now=now, label=label)
    if provider == Provider.OPENAI_CODEX:
        return openai_codex.read(token=token, client=client, now=now, label=label)
    raise ValueError(f"no usage collector for provider {provider!r}")
