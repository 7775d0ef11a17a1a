"""The free reading: headroom from the turns themselves, not from a probe.

Every answer an agent server's forwarder relays carries the provider's
`anthropic-ratelimit-unified-*` headers (a Codex plan's: `x-codex-*`); a served turn
brings the last of them back (`upstream_ratelimit` in the agent-server contract).
They describe the quota of the credential the turn ran on, as of that answer: the
same thing a probe would have bought with a request. This module turns them into a
reading with the probe's own parser and stores it as that subscription's snapshot.

It runs on the turn's hot path, so it costs one cache write and no SQL: no history
row and no forecast update (the sampler's sweep keeps those), and no read of the
stored snapshot first, since a reading of a served answer is an answer and always
replaces what was stored (`reading.reading_replaces`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

import httpx

from subscriptions.headroom.collectors.anthropic import served_reading
from subscriptions.headroom.collectors.openai_codex import HEADER_PREFIX, parse_codex_headers
from subscriptions.headroom.store import snapshots_write

logger = logging.getLogger(__name__)

SOURCE = "turn"


def headroom_reading_observe(
    *, subscription_id: int, headers: Mapping[str, str], now: datetime
) -> bool:
    """Store the reading `headers` give as `subscription_id`'s snapshot.

    Returns True when a reading was stored; False when the headers describe no
    window or the store is unreachable (a turn never fails for either).
    """
    if any(name.lower().startswith(HEADER_PREFIX) for name in headers):
        lowered = {name.lower(): value for name, value in headers.items()}
        reading = parse_codex_headers(lowered, now=now)  # a Codex plan's answer
    else:
        reading = served_reading(httpx.Headers(dict(headers)), now=now, source=SOURCE)
    if reading is None:
        return False
    return snapshots_write({subscription_id: reading})
