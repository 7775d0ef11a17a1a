"""A session's cached opening evidence: one request gathers, a burst waits for it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from gateway.models import GatewaySession
from gateway.server.codex_plan import plan_body
from gateway.server.gathering import Request
from gateway.server.route import SessionCache, turn_facts
from routing.planner import Evidence

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
IDENT = (1, "s", "anthropic")


def request() -> Request:
    evidence = Evidence(turn=turn_facts("anthropic", "claude-sonnet-5-5", NOW))
    return Request(1, "laptop", "anthropic", GatewaySession(pk=9), evidence)


def test_a_burst_of_one_sessions_requests_waits_for_the_first_ones_evidence() -> None:
    cache = SessionCache(seconds=60)
    order: list[str] = []

    async def first() -> None:
        assert await cache.claim(IDENT) is None  # it gathers
        order.append("first gathers")
        await asyncio.sleep(0)
        cache.put(IDENT, request(), request().evidence)

    async def second() -> None:
        cached = await cache.claim(IDENT)
        order.append("second reuses")
        assert cached is not None and cached.session.pk == 9

    async def both() -> None:
        await asyncio.gather(first(), second())

    asyncio.run(both())
    assert order == ["first gathers", "second reuses"]


def test_when_the_first_gives_up_the_next_one_gathers() -> None:
    cache = SessionCache(seconds=60)

    async def run() -> list[bool]:
        assert await cache.claim(IDENT) is None
        waiting = asyncio.ensure_future(cache.claim(IDENT))
        await asyncio.sleep(0)
        cache.settle(IDENT)  # the first request ended without caching anything
        return [await waiting is None, IDENT in cache.gathering]

    assert asyncio.run(run()) == [True, True]


def test_a_codex_clis_request_goes_as_sent_and_an_sdks_is_reshaped() -> None:
    cli = {"model": "gpt-5.5-codex", "input": [{"role": "user"}], "stream": True, "store": False}
    raw = json.dumps(cli).encode()
    assert plan_body(raw, cli) is raw
    sdk = {"model": "gpt-5.5-codex", "input": "hi"}
    sent = json.loads(plan_body(json.dumps(sdk).encode(), sdk))
    assert sent["stream"] is True and sent["store"] is False
    assert sent["input"][0]["content"][0] == {"type": "input_text", "text": "hi"}
