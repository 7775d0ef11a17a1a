"""The query each forwarded call carries, rebuilt from the values target.py read.

Booleans are read as the engine reads them (httputils.BoolValue) but taken only in the
spellings the SDK sends and forwarded as ``1``/``0``; numbers are plain digits; a
list's filters are JSON read by gojson and forwarded in the engine's own map form.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .gojson import read_json
from .policy import Policy, Refused

_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"", "0", "false"})
# The engine's own rule for a container name (daemon/names.go), without its optional
# leading slash.
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")
_DIGITS = re.compile(r"-?[0-9]{1,9}")


def _flag(query: dict[str, str], name: str) -> str:
    value = query.get(name, "").lower()
    if value not in _TRUE | _FALSE:
        raise Refused(f"the query parameter {name!r} is not a boolean", 400)
    return "1" if value in _TRUE else "0"


def _label_filters(policy: Policy, raw: str) -> dict[str, dict[str, bool]]:
    if not raw:
        raise Refused(f"a list filters on the {policy.label!r} label")
    filters: Any = read_json(raw.encode())
    if not isinstance(filters, dict) or set(filters) != {"label"}:
        raise Refused(f"a list filters on the {policy.label!r} label, and on nothing else")
    labels = filters["label"]
    if isinstance(labels, dict) and all(value is True for value in labels.values()):
        labels = list(labels)
    if not isinstance(labels, list) or not labels:
        raise Refused(f"a list filters on the {policy.label!r} label")
    for entry in labels:
        if not isinstance(entry, str) or not (
            entry == policy.label or entry.startswith(f"{policy.label}=")
        ):
            raise Refused(f"a list filters on the {policy.label!r} label")
    return {"label": dict.fromkeys(labels, True)}


def create_query(policy: Policy, query: dict[str, str]) -> dict[str, str]:
    name = query.get("name", "")
    if not _NAME.fullmatch(name) or not name.startswith(policy.name_prefix):
        raise Refused(f"the container name must start with {policy.name_prefix!r}")
    return {"name": name}


def list_query(policy: Policy, query: dict[str, str]) -> dict[str, str]:
    """A list must filter on the agent label (it would name every container else)."""
    limit = query.get("limit", "-1")
    if not _DIGITS.fullmatch(limit):
        raise Refused("the query parameter 'limit' is not an integer", 400)
    filters = _label_filters(policy, query.get("filters", ""))
    return {
        "all": _flag(query, "all"),
        "size": _flag(query, "size"),
        "limit": limit,
        "filters": json.dumps(filters, separators=(",", ":")),
    }


def container_query(route: str, query: dict[str, str]) -> dict[str, str]:
    """inspect, start, stop and remove: the SDK's parameters, in canonical form."""
    if route == "inspect":
        return {"size": _flag(query, "size")} if "size" in query else {}
    if route == "stop":
        seconds = query.get("t")
        if seconds is None:
            return {}
        if not seconds.isascii() or not seconds.isdigit() or len(seconds) > 6:
            raise Refused("the query parameter 't' is not a number of seconds", 400)
        return {"t": str(int(seconds))}
    if route == "remove":
        if _flag(query, "link") != "0":
            raise Refused("removing a link is not an agent runtime call")
        return {"v": _flag(query, "v"), "force": _flag(query, "force")}
    return {}
