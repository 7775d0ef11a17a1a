"""The usage row a finished gateway request leaves: its tokens by kind, what served
it, the API list price of its tokens beside what the platform key billed."""

from __future__ import annotations

import time
from datetime import datetime
from decimal import Decimal
from typing import Any

from gateway import metrics
from gateway.server.exchange import Call
from routing.rung import RungKind
from trinity_contract.prices import TokenUsage

MICRO = Decimal("0.000001")


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
    metrics.REQUESTS.labels(call.provider, f"{status // 100}xx", kind or "none").inc()
    if served is not None:
        metrics.LIST_USD.labels(call.provider, kind).inc(float(list_usd))
        for label, count in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens),
            ("cache_write", usage.cache_creation_input_tokens),
        ):
            metrics.TOKENS.labels(call.provider, label).inc(count)
        if call.attempts > 1:
            metrics.WALKS.labels(call.provider).inc()
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
