"""The usage row a finished gateway request leaves: its tokens by kind, what served
it, the API list price of its tokens beside what the platform key billed."""

from __future__ import annotations

import functools
import time
from datetime import datetime
from decimal import Decimal
from typing import Any

from gateway import metrics
from gateway.server.exchange import Call
from routing.rung import RungKind
from trinity_contract.prices import TokenUsage

MICRO = Decimal("0.000001")


@functools.cache
def _child(metric: Any, *labels: str) -> Any:
    """A metric's child for these labels, looked up once (a request counts six)."""
    return metric.labels(*labels)


def _counted(call: Call, status: int, kind: str, usage: TokenUsage, list_usd: float) -> None:
    """The request in the gateway's metrics."""
    _child(metrics.REQUESTS, call.provider, f"{status // 100}xx", kind or "none").inc()
    if not kind:
        return
    _child(metrics.LIST_USD, call.provider, kind).inc(list_usd)
    for label, count in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_input_tokens),
        ("cache_write", usage.cache_creation_input_tokens),
    ):
        _child(metrics.TOKENS, call.provider, label).inc(count)
    if call.attempts > 1:
        _child(metrics.WALKS, call.provider).inc()


def usage_row(call: Call, *, now: datetime, started: float) -> dict[str, Any]:
    """The request's row as ``GatewayUsage``'s fields (the recorder makes and writes the
    rows in batches, in the thread pool), and its counts in the gateway's metrics."""
    usage, model, cost = TokenUsage(), call.inbound.model, 0.0
    if call.meter is not None:
        for name, part in call.meter.by_model.items():
            usage = usage + part
            model = name if name != "unknown" else model
        cost = call.meter.cost_usd
    served = call.served_by
    kind = served.kind.value if served is not None else ""
    list_usd = Decimal(str(cost)).quantize(MICRO)
    billed = list_usd if served is not None and served.kind is RungKind.API_KEY else Decimal(0)
    status = call.status or (499 if call.disconnected else 0)
    _counted(call, status, kind, usage, float(list_usd))
    return dict(
        key_id=call.key_id,
        owner_id=call.owner_id,
        at=call.at,
        provider=call.provider,
        path=call.path[:40],
        model=model[:100],
        status=status,
        streamed=call.inbound.stream,
        served_by_kind=kind,
        served_by_subscription_id=served.subscription_id if served is not None else None,
        served_by_name=served.name if served is not None else "",
        session_id=call.inbound.session_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        list_usd=list_usd,
        billed_usd=billed,
        attempts=call.attempts,
        switched=call.switched,
        disconnected=call.disconnected,
        duration_ms=int((time.perf_counter() - started) * 1000),
    )
