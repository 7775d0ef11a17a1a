"""The usage parsers and the price table: tables of answers, split at every byte.

The answers are the simulator's own (its Messages and Responses replies, streamed and
not), which speak the providers' shapes; hand-written ones cover what the simulator
does not send (cumulative input in a delta, 1-hour cache writes, cached input).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from agent_server.metering import (
    UNKNOWN_MODEL,
    GrantMeter,
    budget_message,
    provider_of_shape,
)
from simulator.codex import CodexReply
from simulator.messages import Reply, sse_frame
from trinity_contract.prices import ANTHROPIC, OPENAI, TokenUsage, cost_usd, price_of

SSE = {"content-type": "text/event-stream; charset=utf-8"}
JSON = {"content-type": "application/json"}
PROMPT = {"messages": [{"role": "user", "content": "word " * 4000}], "max_tokens": 64}
CODEX_PROMPT = {"input": [{"role": "user", "content": [{"text": "word " * 4000}]}]}
HAIKU = Reply(PROMPT, "claude-haiku-4-5")


def stream_of(events: Any) -> bytes:
    return b"".join(sse_frame(name, data) for name, data in events)


def meter_answer(
    provider: str, chunks: list[bytes], headers: dict[str, str]
) -> tuple[GrantMeter, TokenUsage]:
    grant = GrantMeter(provider)
    reading = grant.request(headers=headers)
    for chunk in chunks:
        reading.feed(chunk)
    reading.finish()
    return grant, grant.summary().usage


def splits(raw: bytes) -> list[list[bytes]]:
    """The answer cut in two at every byte boundary."""
    return [[raw[:i], raw[i:]] for i in range(len(raw) + 1)]


def test_an_anthropic_stream_split_at_every_byte_boundary_meters_the_same() -> None:
    reply = Reply(PROMPT, "claude-sonnet-4-5")
    raw = stream_of(reply.sse_events())
    want = TokenUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
    for chunks in splits(raw):
        grant, usage = meter_answer(ANTHROPIC, chunks, SSE)
        assert usage == want
        assert set(grant.by_model) == {"claude-sonnet-4-5"}
    assert grant.cost_usd == pytest.approx(cost_usd(ANTHROPIC, "claude-sonnet-4-5", want))


def test_a_stream_delivered_one_byte_at_a_time_meters_the_same() -> None:
    reply = Reply(PROMPT, "claude-opus-4-5")
    raw = stream_of(reply.sse_events())
    _, usage = meter_answer(ANTHROPIC, [raw[i : i + 1] for i in range(len(raw))], SSE)
    assert usage == TokenUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)


def test_a_responses_stream_split_at_every_byte_boundary_meters_the_same() -> None:
    reply = CodexReply(CODEX_PROMPT, "gpt-5.1-codex")
    raw = stream_of(reply.sse_events())
    want = TokenUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
    for chunks in splits(raw):
        grant, usage = meter_answer(OPENAI, chunks, SSE)
        assert usage == want
        assert set(grant.by_model) == {"gpt-5.1-codex"}


@pytest.mark.parametrize(
    ("provider", "payload", "want"),
    [
        (
            ANTHROPIC,
            HAIKU.message(),
            TokenUsage(input_tokens=HAIKU.input_tokens, output_tokens=HAIKU.output_tokens),
        ),
        (
            ANTHROPIC,
            {
                "type": "message",
                "model": "claude-sonnet-4-5",
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 20,
                    "cache_creation_input_tokens": 300,
                    "cache_read_input_tokens": 4000,
                    "cache_creation": {"ephemeral_1h_input_tokens": 100},
                },
            },
            TokenUsage(10, 20, 300, 4000, 100),
        ),
        (
            OPENAI,
            {
                "object": "response",
                "model": "gpt-5-codex",
                "usage": {
                    "input_tokens": 1000,
                    "input_tokens_details": {"cached_tokens": 800},
                    "output_tokens": 50,
                },
            },
            TokenUsage(input_tokens=200, output_tokens=50, cache_read_input_tokens=800),
        ),
        # cached beyond the input (garbage) is bounded by the input
        (
            OPENAI,
            {
                "object": "response",
                "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 9}},
            },
            TokenUsage(input_tokens=0, cache_read_input_tokens=5),
        ),
    ],
    ids=["messages", "messages-cache", "responses-cached", "responses-overcached"],
)
def test_a_json_answer_meters_its_usage(provider: str, payload: Any, want: TokenUsage) -> None:
    raw = json.dumps(payload).encode()
    for chunks in splits(raw)[:: max(1, len(raw) // 50)]:
        _, usage = meter_answer(provider, chunks, JSON)
        assert usage == want


def test_message_delta_usage_is_cumulative_and_replaces_each_field() -> None:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "model": "claude-sonnet-4-5",
                    "usage": {
                        "input_tokens": 100,
                        "output_tokens": 1,
                        "cache_read_input_tokens": 50,
                    },
                },
            },
        ),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 40}}),
        (
            "message_delta",
            {"type": "message_delta", "usage": {"output_tokens": 90, "input_tokens": 120}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    grant, usage = meter_answer(ANTHROPIC, [stream_of(events)], SSE)
    assert usage == TokenUsage(input_tokens=120, output_tokens=90, cache_read_input_tokens=50)
    assert grant.cost_usd == pytest.approx((120 * 3 + 90 * 15 + 50 * 0.3) / 1e6)


def test_usage_counts_while_the_stream_is_still_open() -> None:
    """The budget sees a request's input as soon as message_start arrives."""
    reply = Reply(PROMPT, "claude-sonnet-4-5")
    events = list(reply.sse_events())
    grant = GrantMeter(ANTHROPIC)
    reading = grant.request(headers=SSE)
    reading.feed(sse_frame(*events[0]))
    assert grant.summary().usage.input_tokens == reply.input_tokens
    assert grant.cost_usd > 0


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\xff" * 500,
        b"data: {not json with usage\n\n",
        b'data: ["usage"]\n\n',
        b'data: {"type": "message_start", "message": {"usage": "lots"}}\n\n',
        b'data: {"type": "message_delta", "usage": {"output_tokens": -5}}\n\n',
        b'data: {"type": "message_delta", "usage": {"output_tokens": true}}\n\n',
        b'data: {"type": "response.completed", "response": {"usage": [1]}}\n\n',
        b"event: ping\ndata: {}\n\n" * 100,
        b"data: " + b"[" * 100_000 + b"usage\n\n",
    ],
    ids=lambda raw: raw[:30].decode("latin-1"),
)
def test_garbage_meters_nothing_and_never_raises(raw: bytes) -> None:
    for headers in (SSE, JSON):
        grant, usage = meter_answer(ANTHROPIC, [raw], headers)
        assert usage == TokenUsage() and grant.cost_usd == 0
        assert grant.unmetered == 1  # a served answer with no usage is counted as such


def test_an_answer_without_usage_is_counted_unmetered() -> None:
    grant, _ = meter_answer(ANTHROPIC, [b'{"type": "message", "content": []}'], JSON)
    assert (grant.requests, grant.unmetered) == (1, 1)


def test_a_gzip_answer_is_read_through_its_encoding() -> None:
    payload = Reply(PROMPT, "claude-sonnet-4-5").message()
    raw = gzip.compress(json.dumps(payload).encode())
    _, usage = meter_answer(ANTHROPIC, [raw[:10], raw[10:]], {**JSON, "content-encoding": "gzip"})
    assert usage.input_tokens == payload["usage"]["input_tokens"]


def test_an_encoding_it_cannot_read_is_counted_unmetered() -> None:
    grant, usage = meter_answer(ANTHROPIC, [b"\x1b\x00br"], {**JSON, "content-encoding": "br"})
    assert usage == TokenUsage() and grant.unmetered == 1


def test_usage_is_kept_per_model() -> None:
    grant = GrantMeter(ANTHROPIC)
    for model in ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-haiku-4-5"):
        reading = grant.request(headers=JSON)
        reading.feed(
            json.dumps(
                {"model": model, "usage": {"input_tokens": 1000, "output_tokens": 10}}
            ).encode()
        )
        reading.finish()
    summary = grant.summary()
    assert summary.requests == 3
    assert summary.by_model["claude-haiku-4-5"][0] == TokenUsage(2000, 20)
    assert summary.by_model["claude-sonnet-4-5"][0] == TokenUsage(1000, 10)
    assert summary.cost_usd == pytest.approx(sum(cost for _, cost in summary.by_model.values()))


def test_an_answer_naming_no_model_is_priced_as_the_dearest() -> None:
    grant, _ = meter_answer(ANTHROPIC, [b'{"usage": {"input_tokens": 1000000}}'], JSON)
    assert set(grant.by_model) == {UNKNOWN_MODEL}
    assert grant.cost_usd == pytest.approx(15.0)


@pytest.mark.parametrize(
    ("provider", "model", "prices"),
    [
        (ANTHROPIC, "claude-sonnet-4-5", (3.0, 15.0, 3.75, 0.30)),
        (ANTHROPIC, "claude-sonnet-5", (3.0, 15.0, 3.75, 0.30)),
        (ANTHROPIC, "claude-3-7-sonnet-latest", (3.0, 15.0, 3.75, 0.30)),
        (ANTHROPIC, "claude-opus-4-5", (5.0, 25.0, 6.25, 0.50)),
        (ANTHROPIC, "claude-opus-4-1", (15.0, 75.0, 18.75, 1.50)),
        (ANTHROPIC, "claude-opus-4-20250514", (15.0, 75.0, 18.75, 1.50)),
        (ANTHROPIC, "claude-haiku-4-5", (1.0, 5.0, 1.25, 0.10)),
        (ANTHROPIC, "claude-3-5-haiku-latest", (0.80, 4.0, 1.0, 0.08)),
        (ANTHROPIC, "claude-nope-1", (15.0, 75.0, 18.75, 1.50)),
        (OPENAI, "gpt-5.1-codex", (1.25, 10.0, 0.0, 0.125)),
        (OPENAI, "gpt-5.1-codex-mini", (0.25, 2.0, 0.0, 0.025)),
        (OPENAI, "gpt-5", (1.25, 10.0, 0.0, 0.125)),
        (OPENAI, "o9-unknown", (1.25, 10.0, 0.0, 0.125)),
    ],
)
def test_the_price_table(provider: str, model: str, prices: tuple[float, ...]) -> None:
    price = price_of(provider, model)
    assert (price.input, price.output, price.cache_write, price.cache_read) == prices


def test_a_one_hour_cache_write_costs_twice_the_input() -> None:
    usage = TokenUsage(cache_creation_input_tokens=1_000_000, cache_write_1h_tokens=400_000)
    assert cost_usd(ANTHROPIC, "claude-sonnet-4-5", usage) == pytest.approx(0.6 * 3.75 + 0.4 * 6.0)


@pytest.mark.parametrize(
    ("spent", "budget", "admits"),
    [
        (0.0, None, True),
        (1e9, None, True),
        (0.0, 0.0, False),  # nothing left: the first request is refused
        (0.999999, 1.0, True),
        (1.0, 1.0, False),  # reached exactly: closed
        (1.2, 1.0, False),
    ],
)
def test_a_budget_admits_only_while_the_metered_spend_is_below_it(
    spent: float, budget: float | None, admits: bool
) -> None:
    grant = GrantMeter(ANTHROPIC, budget_usd=budget)
    grant.cost_usd = spent
    assert grant.admits() is admits


def test_the_refusal_names_the_budget_in_words() -> None:
    grant = GrantMeter(
        ANTHROPIC,
        budget_usd=1.0,
        budget_name="the platform key's daily budget of $1.00 for agent 'bot'",
    )
    grant.cost_usd = 1.0213
    message = budget_message(grant)
    assert message.startswith("The platform key's daily budget of $1.00 for agent 'bot' is reached")
    assert "$1.02 of the $1.00" in message


@pytest.mark.parametrize(
    ("shape", "provider"),
    [
        ("bearer", ANTHROPIC),
        ("x-api-key", ANTHROPIC),
        ("codex-plan", OPENAI),
        ("openai-key", OPENAI),
    ],
)
def test_each_grant_shape_is_priced_at_its_provider(shape: str, provider: str) -> None:
    assert provider_of_shape(shape) == provider
