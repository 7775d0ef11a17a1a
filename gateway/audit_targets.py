"""The gateway keys' write routes, for the audit log (``trinity/audit/registry.py``)."""

from __future__ import annotations

from typing import Any

from gateway.models import GatewayKey
from trinity.audit.registry import Target, register


def _by_pk(kwargs: Any) -> Any:
    return GatewayKey.objects.filter(pk=kwargs["pk"])


def _created(data: Any) -> GatewayKey | None:
    if not isinstance(data, dict) or "id" not in data:
        return None
    return GatewayKey.objects.filter(pk=data["id"]).first()


register("gateway-key-list", Target("gateway_key", created=_created))
register("gateway-key-detail", Target("gateway_key", candidates=_by_pk))
