"""Prometheus metrics: the instruments, the scrape-time gauges and ``GET /metrics``.

Counters and histograms live here and nowhere else; the dispatch loop calls
``turn_finished`` once per finished turn and the sampler ``probe_observed`` once per
probe. Each is a few in-memory increments (in multiprocess mode, writes into this
process's mmap'd file): no database or cache read on a turn's path.

Multiprocess mode: with ``PROMETHEUS_MULTIPROC_DIR`` set (before this module is
imported: prometheus_client picks its value store at import), every process that
shares the directory (gunicorn workers, Celery workers and their pool children)
writes its own file, and a scrape of any web worker sums them all. gunicorn's
``child_exit`` hook (deploy/gunicorn.conf.py) marks a dead worker's files. Without
it each process reports only itself (``make run``, tests).

Gauges that describe state (each subscription's 5h and 7d windows, agent servers
up) are not kept by any process: ``StateCollector`` runs the apps' own collectors at
scrape time (``subscriptions/metrics.py``, ``agents/metrics.py``), from the cached
snapshots and the agents table, so they are never stale per process and
cost a turn nothing. Their labels are subscription names only, never a token, a
fingerprint or an id.

``/metrics`` is off the public API: a client must present ``TRINITY_METRICS_TOKEN``
as ``Authorization: Bearer <token>`` (always: unset, the token is generated into
``var/metrics_token``) and come from ``TRINITY_METRICS_ALLOW_FROM`` (loopback by
default). An address alone proves nothing on a host where agents and other local
users share loopback.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import threading
from collections.abc import Iterable
from typing import Protocol

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from trinity_contract.redaction import register_secret

logger = logging.getLogger(__name__)

PLAN = "plan"
KEY = "key"
NONE = "none"
# The rung kinds of routing/rung.py as the metrics name them: an operator reads
# "plan" and "key", not the model's field values.
CREDENTIAL = {"subscription": PLAN, "api_key": KEY}

TURNS = Counter(
    "trinity_turns",
    "Finished turns by outcome (succeeded, failed), error code and the credential kind "
    "that served or last refused (plan, key, none).",
    ["outcome", "error_code", "credential"],
)
TURN_RUNGS = Histogram(
    "trinity_turn_rungs",
    "Rungs (attempts) per finished turn that reached its agent server; above 1 it walked.",
    buckets=(1, 2, 3, 4, 5, 6, 8, 12, 16),
)
SWITCHES = Counter(
    "trinity_switches",
    "Assignments committed to the subscription that served a walked turn.",
)
PRE_DISPATCH_ROUTES = Counter(
    "trinity_pre_dispatch_routes",
    "First attempts routed around an assignment known not to serve, by where (plan, key).",
    ["to"],
)
WALKS_EXHAUSTED = Counter(
    "trinity_walks_exhausted",
    "Walks that ended with every candidate refused, by the turn's error code.",
    ["error_code"],
)
KEY_SPEND_USD = Counter(
    "trinity_key_spend_usd",
    "What turns served by the platform API key cost, in USD.",
)
TOKENS = Counter(
    "trinity_tokens",
    "Tokens of served turns by credential kind (plan, key) and direction (input, output).",
    ["credential", "direction"],
)
TURN_OVERHEAD = Histogram(
    "trinity_turn_overhead_seconds",
    "The backend's own time per turn: the dispatch loop's wall time less its waits on "
    "agent servers (turn requests, starts, legacy reloads).",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
PROBES = Counter(
    "trinity_headroom_probes",
    "Sampler probes of subscriptions' usage by the reading's status "
    "(ok, rate_limited, invalid_token, error).",
    ["result"],
)
PROBE_SECONDS = Histogram(
    "trinity_headroom_probe_seconds",
    "How long one usage probe took.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0),
)
BREAKER_TRANSITIONS = Counter(
    "trinity_breaker_transitions",
    "Provider circuit breaker transitions by provider and the state entered (open, closed).",
    ["provider", "state"],
)
TURNS_AT_CAPACITY = Counter(
    "trinity_turns_routed_at_capacity",
    "Attempts routed away from a subscription serving its concurrency cap.",
)


def credential_kind(kind: str | None) -> str:
    """``plan``, ``key`` or ``none`` for a rung kind (``subscription``, ``api_key``)."""
    return CREDENTIAL.get(kind or "", NONE)


def turn_finished(
    *,
    succeeded: bool,
    error_code: str,
    credential: str,
    rungs: int,
    switched: bool,
    routed: str,
    exhausted: bool,
    input_tokens: int,
    output_tokens: int,
    key_usd: float,
    overhead_seconds: float,
) -> None:
    """Count one finished turn. ``credential`` is ``plan``, ``key`` or ``none``;
    ``routed`` is where pre-dispatch sent the first attempt (``plan``, ``key``) or "".
    """
    TURNS.labels("succeeded" if succeeded else "failed", error_code, credential).inc()
    if rungs:
        TURN_RUNGS.observe(rungs)
    if switched:
        SWITCHES.inc()
    if routed:
        PRE_DISPATCH_ROUTES.labels(routed).inc()
    if exhausted:
        WALKS_EXHAUSTED.labels(error_code).inc()
    if succeeded and credential != NONE:
        if input_tokens:
            TOKENS.labels(credential, "input").inc(input_tokens)
        if output_tokens:
            TOKENS.labels(credential, "output").inc(output_tokens)
    if key_usd > 0:
        KEY_SPEND_USD.inc(key_usd)
    TURN_OVERHEAD.observe(max(0.0, overhead_seconds))


def turns_failed_outside_the_loop(*, error_code: str, count: int = 1) -> None:
    """Count turns failed without the dispatch loop finishing them: the reaper's
    (``worker_lost``), or a queued turn whose agent was deleted."""
    if count:
        TURNS.labels("failed", error_code, NONE).inc(count)


def breaker_transition(*, provider: str, state: str) -> None:
    """Count the provider's breaker opening (or re-opening) or a trial closing it."""
    BREAKER_TRANSITIONS.labels(provider, state).inc()


def routed_at_capacity() -> None:
    TURNS_AT_CAPACITY.inc()


def probe_observed(*, result: str, seconds: float) -> None:
    """Count one usage probe and its latency."""
    PROBES.labels(result).inc()
    PROBE_SECONDS.observe(seconds)


# Scrape time


class StateCollector(Collector):
    """Gauges computed at scrape time, by the app that owns the state they describe.

    Each app registers its own collectors from its ``AppConfig.ready``
    (``state_collector_register``): ``subscriptions/metrics.py`` the windows of every
    subscription, ``agents/metrics.py`` the agent servers up. So nothing here imports
    an app above ``trinity``. A collector that fails (the store or the database down)
    drops its gauges from that scrape, never the counters.
    """

    def describe(self) -> Iterable[Metric]:
        return [family for collector in _state_collectors for family in collector.describe()]

    def collect(self) -> Iterable[Metric]:
        families: list[Metric] = []
        for collector in _state_collectors:
            try:
                families.extend(collector.collect())
            except Exception as exc:
                logger.warning(
                    "metrics: %s gauges unavailable: %s",
                    type(collector).__name__,
                    type(exc).__name__,
                )
                families.extend(collector.describe())
        return families


class StateGauges(Protocol):
    """An app's scrape-time gauges: their families empty (``describe``) and filled."""

    def describe(self) -> Iterable[Metric]: ...

    def collect(self) -> Iterable[Metric]: ...


_state_collectors: list[StateGauges] = []


def state_collector_register(collector: StateGauges) -> None:
    """Add an app's scrape-time gauges (once per process: a second of the same type is ignored)."""
    if not any(type(existing) is type(collector) for existing in _state_collectors):
        _state_collectors.append(collector)


_registry: CollectorRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> CollectorRegistry:
    """This process's scrape registry: every process's instruments plus the state gauges."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                    built = CollectorRegistry()
                    multiprocess.MultiProcessCollector(built)
                else:
                    built = REGISTRY
                built.register(StateCollector())
                _registry = built
    return _registry


# The endpoint


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.TRINITY_METRICS_ALLOW_FROM]


def _client_allowed(remote_addr: str | None) -> bool:
    if settings.TRINITY_METRICS_ALLOW_FROM == ["any"]:
        return True
    try:
        address = ipaddress.ip_address(remote_addr or "")
    except ValueError:
        return False
    return any(address in network for network in _networks())


def _token_presented(request: HttpRequest) -> bool:
    expected: str = settings.TRINITY_METRICS_TOKEN
    if not expected:
        return False  # settings never leave it empty; an override that does opens nothing
    register_secret(expected)  # never in a log line, whatever logs the header
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode(), expected.encode()
    )


@require_GET
@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; 403 from outside the allowed networks, 401 without the
    token (or with another)."""
    if not _client_allowed(request.META.get("REMOTE_ADDR")):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    if not _token_presented(request):
        response = HttpResponse("unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = "Bearer"
        return response
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
