"""What a grant's credential was spent on: the usage of every answer, summed and priced.

The forwarder hands each served answer's bytes to a `RequestMeter` after it sent them
on (metering never holds a byte back), which reads the provider's own usage figures:

- Anthropic Messages, JSON: the answer's `usage` (input, output, cache write, cache
  read tokens) and `model`;
- Anthropic Messages, SSE: `message_start`'s `message.usage` and `message.model`, then
  each `message_delta`'s `usage`, whose fields are cumulative (each replaces the one
  before; input and cache fields too, when a delta carries them);
- OpenAI Responses (a Codex plan's backend and the platform key alike), JSON: the
  response's `usage`; SSE: the `usage` of `response.completed` (or `.incomplete` /
  `.failed`, billed alike). Its `input_tokens` include the cached ones
  (`input_tokens_details.cached_tokens`), which are moved to the cache-read count.

`count_tokens` answers carry no usage and cost nothing. SSE is parsed line by line as
it arrives (an event split anywhere across chunks is joined; a line is JSON-decoded
only when it is one of the events above), a JSON answer is decoded once it is complete (kept up
to `MAX_JSON_BYTES`); garbage is ignored. Each usage update adds its difference to
the `GrantMeter`, per model, priced by the shared table (`trinity_contract/prices.py`),
so a key grant's spend is known while its answers still stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from trinity_contract.prices import ANTHROPIC, OPENAI, TokenUsage, cost_usd

# A complete JSON answer is decoded from a copy of at most this many bytes (far above
# any answer's size: the largest output is a few hundred kilobytes).
MAX_JSON_BYTES: Final = 16 * 1024 * 1024
# An SSE line longer than this is dropped unread (no usage event is that long, save a
# Responses `response.completed` echoing a huge output, which this still admits).
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
# A key grant with a budget serves at most this many requests at once (more wait their
# turn): the spend can pass the budget only by what is in flight when it is reached.
MAX_IN_FLIGHT: Final = 8
# The model an answer that names none is priced as (its provider's dearest family).
UNKNOWN_MODEL: Final = "unknown"
_RESPONSES_DONE: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
# The events that carry usage, as JSON tokens: the quotes on both sides cannot occur
# unescaped inside a string, so text that merely mentions them never matches, and the
# text deltas that make up most of a stream are never decoded.
_USAGE_EVENT: Final = re.compile(
    rb'"(?:message_start|message_delta|response\.completed|response\.incomplete'
    rb'|response\.failed)"'
)
# What a chunk is first scanned for (plain substring searches, much faster than the
# pattern), per provider: a region without any of them is skipped unread.
# A Messages stream names `"message_` only in its message_start/_delta/_stop events.
_MARKERS: Final = {
    ANTHROPIC: (b'"message_',),
    OPENAI: (b'.completed"', b'.incomplete"', b'.failed"'),
}
_ANTHROPIC_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def provider_of_shape(shape: str) -> str:
    """The provider a grant's header shape spends at."""
    return OPENAI if shape in ("codex-plan", "openai-key") else ANTHROPIC


@dataclass(frozen=True, slots=True)
class Metered:
    """A grant's (or a runtime's) metered spend: what the turn's answer reports."""

    requests: int
    cost_usd: float
    usage: TokenUsage
    by_model: dict[str, tuple[TokenUsage, float]]
    # Requests the forwarder refused because the budget was reached (and whose name).
    budget_refused: int = 0
    budget_usd: float | None = None
    budget_name: str | None = None
    # Served answers whose usage could not be read (an encoding it cannot decode).
    unmetered: int = 0


@dataclass
class GrantMeter:
    """The running sum of one grant's metered usage, per model, and its budget.

    `budget_usd` (a key grant's remaining budget, from the platform) closes the grant
    once the metered cost reaches it: `admits()` is then False.
    """

    provider: str
    budget_usd: float | None = None
    budget_name: str | None = None
    cost_usd: float = 0.0
    requests: int = 0
    unmetered: int = 0
    refused: int = 0
    by_model: dict[str, TokenUsage] = field(default_factory=dict)
    cost_by_model: dict[str, float] = field(default_factory=dict)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)

    def admits(self) -> bool:
        """Whether one more billed request may go upstream on this grant."""
        return self.budget_usd is None or self.cost_usd < self.budget_usd

    def add(self, model: str, delta: TokenUsage) -> None:
        """Count `delta` (a difference between two usage readings) on `model`."""
        cost = cost_usd(self.provider, model, delta)
        self.by_model[model] = self.by_model.get(model, TokenUsage()) + delta
        self.cost_by_model[model] = self.cost_by_model.get(model, 0.0) + cost
        self.cost_usd += cost

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the grant's in-flight slots (a grant without a budget: no wait)."""
        if self.budget_usd is None:
            yield
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        async with self._slots:
            yield

    def request(self, *, headers: Mapping[str, str]) -> RequestMeter:
        """A meter for one served answer with these response headers."""
        self.requests += 1
        return RequestMeter(self, headers=headers)

    def summary(self) -> Metered:
        total = TokenUsage()
        for usage in self.by_model.values():
            total = total + usage
        return Metered(
            requests=self.requests,
            cost_usd=self.cost_usd,
            usage=total,
            by_model={m: (u, self.cost_by_model.get(m, 0.0)) for m, u in self.by_model.items()},
            budget_refused=self.refused,
            budget_usd=self.budget_usd,
            budget_name=self.budget_name,
            unmetered=self.unmetered,
        )


class RequestMeter:
    """Reads one answer's usage as its bytes go by; adds each update to the grant."""

    def __init__(self, grant: GrantMeter, *, headers: Mapping[str, str]) -> None:
        self.grant = grant
        self.sse = "text/event-stream" in headers.get("content-type", "").lower()
        self.model = UNKNOWN_MODEL
        self.fields: dict[str, int] = {}
        self.counted = TokenUsage()
        self.seen_usage = False
        self._buf = bytearray()
        self._dropping = False
        self._inflate: Any = None
        encoding = headers.get("content-encoding", "").strip().lower()
        self._dead = encoding not in ("", "identity", "gzip", "deflate")
        self._markers = _MARKERS.get(grant.provider, _MARKERS[ANTHROPIC])
        if encoding in ("gzip", "deflate"):
            # 32 + 15: a gzip or a zlib header, whichever the answer has.
            self._inflate = zlib.decompressobj(47)

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the answer (already sent on). Never raises."""
        if self._dead or not chunk:
            return
        if self._inflate is not None:
            try:
                chunk = self._inflate.decompress(chunk)
            except zlib.error:
                self._dead = True
                return
        if self.sse:
            self._feed_sse(chunk)
        elif len(self._buf) + len(chunk) <= MAX_JSON_BYTES:
            self._buf += chunk
        else:
            self._dead = True

    def finish(self) -> None:
        """The answer is complete: decode a JSON one; count an unreadable one."""
        if not self._dead and not self.sse:
            with contextlib.suppress(ValueError, RecursionError):
                self._payload(json.loads(self._buf))
        self._buf = bytearray()
        if not self.seen_usage:
            self.grant.unmetered += 1

    def _feed_sse(self, chunk: bytes) -> None:
        buf = self._buf
        start = len(buf)
        buf += chunk
        last = chunk.rfind(b"\n")
        if last < 0:
            if len(buf) > MAX_LINE_BYTES:
                buf.clear()
                self._dropping = True  # the rest of this line is dropped too
            return
        end = start + last
        # Only the lines of the events that carry usage are decoded.
        found = False
        for marker in self._markers:
            if buf.find(marker, 0, end) >= 0:
                found = True
                break
        if found:
            lines = bytes(buf[:end]).split(b"\n")
            if self._dropping:
                lines = lines[1:]
            for line in lines:
                if line.startswith(b"data:") and _USAGE_EVENT.search(line):
                    self._event(line[5:])
        self._dropping = False
        del buf[: end + 1]

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._anthropic(message.get("model"), message.get("usage"))
        elif kind == "message_delta":
            self._anthropic(None, event.get("usage"))
        elif kind in _RESPONSES_DONE:
            response = event.get("response")
            if isinstance(response, dict):
                self._responses(response.get("model"), response.get("usage"))

    def _payload(self, payload: Any) -> None:
        """A complete JSON answer: a Messages message or a Response."""
        if not isinstance(payload, dict):
            return
        if payload.get("object") == "response" or self.grant.provider == OPENAI:
            self._responses(payload.get("model"), payload.get("usage"))
        else:
            self._anthropic(payload.get("model"), payload.get("usage"))

    def _anthropic(self, model: Any, usage: Any) -> None:
        if isinstance(model, str) and model:
            self.model = model[:200]
        if not isinstance(usage, dict):
            return
        read = {name: _count(usage.get(name)) for name in _ANTHROPIC_FIELDS}
        nested = usage.get("cache_creation")
        if isinstance(nested, dict):
            read["cache_write_1h_tokens"] = _count(nested.get("ephemeral_1h_input_tokens"))
        known = {name: value for name, value in read.items() if value is not None}
        if known:  # a usage with no readable count says nothing
            self.fields.update(known)
            self._update(TokenUsage(**self.fields))

    def _responses(self, model: Any, usage: Any) -> None:
        if isinstance(model, str) and model:
            self.model = model[:200]
        if not isinstance(usage, dict):
            return
        details = usage.get("input_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
        total_in = _count(usage.get("input_tokens"))
        if total_in is None:
            return
        cached = min(cached or 0, total_in)
        self._update(
            TokenUsage(
                input_tokens=total_in - cached,
                output_tokens=_count(usage.get("output_tokens")) or 0,
                cache_read_input_tokens=cached,
            )
        )

    def _update(self, reading: TokenUsage) -> None:
        """A new cumulative reading of this answer: its difference goes to the grant."""
        self.seen_usage = True
        delta = reading - self.counted
        if delta != TokenUsage():
            self.grant.add(self.model, delta)
            self.counted = reading


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def budget_message(meter: GrantMeter) -> str:
    """What a refused request's answer says, for the person reading the CLI's output."""
    name = meter.budget_name or "the platform API key's budget"
    return (
        f"{name[:1].upper()}{name[1:]} is reached: this turn's requests on the key spent "
        f"${meter.cost_usd:.2f} of the ${meter.budget_usd or 0:.2f} it had left, so the "
        "Trinity forwarder refuses further requests on the key until the budget reopens "
        "or an admin raises it."
    )
