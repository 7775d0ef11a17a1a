"""The gateway's Prometheus instruments, on a registry of its own: the gateway
process serves them at its ``GET /metrics`` (the platform's metrics token as Bearer).
Labels are providers, outcomes and kinds, never a key, a person or a token."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "trinity_gateway_requests",
    "Gateway requests answered, by provider, status class and what served them.",
    ["provider", "status", "served_by"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "trinity_gateway_tokens",
    "Tokens the gateway's served answers used, by provider and kind.",
    ["provider", "kind"],
    registry=REGISTRY,
)
LIST_USD = Counter(
    "trinity_gateway_list_usd",
    "The API list price of the gateway's served tokens, by what served them.",
    ["provider", "served_by"],
    registry=REGISTRY,
)
REFUSED = Counter(
    "trinity_gateway_refused",
    "Requests the gateway refused itself, by reason (a key limit, auth, bad input).",
    ["reason"],
    registry=REGISTRY,
)
WALKS = Counter(
    "trinity_gateway_walks",
    "Gateway requests that walked past a refusing credential and were served.",
    ["provider"],
    registry=REGISTRY,
)
OPEN = Gauge(
    "trinity_gateway_open_requests",
    "Requests this gateway process is serving now.",
    registry=REGISTRY,
)
OVERHEAD = Histogram(
    "trinity_gateway_overhead_seconds",
    "Time the gateway spent before the upstream request left (auth, limits, routing).",
    buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0),
    registry=REGISTRY,
)
