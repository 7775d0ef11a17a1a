"""What a provider charges per token: one price table, read by everyone who prices.

The agent server's forwarder prices the usage it meters per request (so a key grant
can be refused at its budget), the platform reads the priced spend the agent server
reports, and the provider simulator bills its keys by the same table, so the
platform's ledger and the provider's charge can be compared figure for figure.

Here, not sent by the platform with each turn: the forwarder must price every answer
as it relays it, the in-process runtime has no platform to ask, and the simulator is
no platform client; one standard-library table all three import cannot drift.

Prices are USD per million tokens, per model family, as the providers publish them:
``input`` (uncached), ``output``, ``cache_write`` (a 5-minute prompt-cache write;
a 1-hour write is priced at twice the input price, as Anthropic does), ``cache_read``.
OpenAI bills no cache writes; its cached input is ``cache_read``. A model no row
names is priced at its provider's dearest family: a key's budget must never read an
unknown model as free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Provider = Literal["anthropic", "openai"]
ANTHROPIC: Final = "anthropic"
OPENAI: Final = "openai"
PER_TOKENS: Final = 1_000_000
# Anthropic prices a 1-hour cache write at twice the input price.
CACHE_WRITE_1H_FACTOR: Final = 2.0


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of one model family."""

    input: float
    output: float
    cache_write: float
    cache_read: float


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens one answer (or a sum of answers) was billed for, in Anthropic's
    split: ``input_tokens`` excludes the cache's (an OpenAI answer's cached input is
    moved to ``cache_read_input_tokens``); ``cache_write_1h_tokens`` is the part of
    ``cache_creation_input_tokens`` written for an hour."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_1h_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cache_creation_input_tokens - other.cache_creation_input_tokens,
            self.cache_read_input_tokens - other.cache_read_input_tokens,
            self.cache_write_1h_tokens - other.cache_write_1h_tokens,
        )


# (prefix or family word, price), most specific first: the first row a model name
# contains wins. Anthropic: claude-opus-4-5 and later cost less than opus 4/4.1.
ANTHROPIC_PRICES: Final[tuple[tuple[str, Price], ...]] = (
    ("opus-4-0", Price(15.0, 75.0, 18.75, 1.50)),
    ("opus-4-1", Price(15.0, 75.0, 18.75, 1.50)),
    ("opus-4-2025", Price(15.0, 75.0, 18.75, 1.50)),
    ("claude-3-opus", Price(15.0, 75.0, 18.75, 1.50)),
    ("opus", Price(5.0, 25.0, 6.25, 0.50)),
    ("3-5-haiku", Price(0.80, 4.0, 1.0, 0.08)),
    ("3-haiku", Price(0.25, 1.25, 0.30, 0.03)),
    ("haiku", Price(1.0, 5.0, 1.25, 0.10)),
    ("sonnet", Price(3.0, 15.0, 3.75, 0.30)),
)
ANTHROPIC_DEAREST: Final = Price(15.0, 75.0, 18.75, 1.50)

OPENAI_PRICES: Final[tuple[tuple[str, Price], ...]] = (
    ("codex-mini", Price(0.25, 2.0, 0.0, 0.025)),
    ("gpt-5-mini", Price(0.25, 2.0, 0.0, 0.025)),
    ("gpt-5-nano", Price(0.05, 0.40, 0.0, 0.005)),
    ("gpt-5", Price(1.25, 10.0, 0.0, 0.125)),
)
OPENAI_DEAREST: Final = Price(1.25, 10.0, 0.0, 0.125)


def price_of(provider: str, model: str) -> Price:
    """The price of ``model`` at ``provider`` (its dearest family when no row names it)."""
    name = model.lower()
    table, dearest = (
        (OPENAI_PRICES, OPENAI_DEAREST)
        if provider == OPENAI
        else (ANTHROPIC_PRICES, ANTHROPIC_DEAREST)
    )
    for word, price in table:
        if word in name:
            return price
    return dearest


def cost_usd(provider: str, model: str, usage: TokenUsage) -> float:
    """What ``usage`` on ``model`` costs at ``provider``, in USD."""
    price = price_of(provider, model)
    hourly = min(usage.cache_write_1h_tokens, usage.cache_creation_input_tokens)
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + (usage.cache_creation_input_tokens - hourly) * price.cache_write
        + hourly * price.input * CACHE_WRITE_1H_FACTOR
        + usage.cache_read_input_tokens * price.cache_read
    ) / PER_TOKENS
