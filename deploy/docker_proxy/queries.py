"""The query each forwarded call carries, rebuilt from the values target.py read.

Booleans are read as the engine reads them (httputils.BoolValue) but taken only in the
spellings the SDK sends and forwarded as ``1``/``0``; numbers are plain digits; a
list's filters are JSON read by gojson (the SDK's list form or the engine's map form)
and forwarded in the engine's map form. Every list filters on what makes it the
agents': the agent label (containers, services, secrets), the agents' network's name
(networks), one service the caller then shows is an agent's (tasks).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .agent import is_agent_name
from .gojson import read_json
from .policy import Policy, Refused
from .target import REF

_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"", "0", "false"})
_DIGITS = re.compile(r"-?[0-9]{1,9}")


def _flag(query: dict[str, str], name: str) -> str:
    value = query.get(name, "").lower()
    if value not in _TRUE | _FALSE:
        raise Refused(f"the query parameter {name!r} is not a boolean", 400)
    return "1" if value in _TRUE else "0"


def _filters(raw: str, key: str, rule: str) -> list[str]:
    """The values of the one filter ``key`` a list's ``filters`` holds, in either form
    the engine reads (a list of strings, or a map of strings to true); refuses a
    missing filter or any other with ``rule``."""
    filters: Any = read_json(raw.encode()) if raw else None
    if not isinstance(filters, dict) or set(filters) != {key}:
        raise Refused(rule)
    values = filters[key]
    if isinstance(values, dict) and all(value is True for value in values.values()):
        values = list(values)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise Refused(rule)
    return list(values)


def _label_filters(policy: Policy, raw: str) -> str:
    """A list's filters on the agent label (with any value), re-encoded."""
    rule = f"a list filters on the {policy.label!r} label, and on nothing else"
    labels = _filters(raw, "label", rule)
    for entry in labels:
        if not (entry == policy.label or entry.startswith(f"{policy.label}=")):
            raise Refused(rule)
    return json.dumps({"label": dict.fromkeys(labels, True)}, separators=(",", ":"))


def create_query(policy: Policy, query: dict[str, str]) -> dict[str, str]:
    name = query.get("name", "")
    if not is_agent_name(policy, name):
        raise Refused(f"the container name must start with {policy.name_prefix!r}")
    return {"name": name}


def list_query(policy: Policy, query: dict[str, str]) -> dict[str, str]:
    """A list must filter on the agent label (it would name every container else)."""
    limit = query.get("limit", "-1")
    if not _DIGITS.fullmatch(limit):
        raise Refused("the query parameter 'limit' is not an integer", 400)
    return {
        "all": _flag(query, "all"),
        "size": _flag(query, "size"),
        "limit": limit,
        "filters": _label_filters(policy, query.get("filters", "")),
    }


def label_list_query(policy: Policy, query: dict[str, str]) -> dict[str, str]:
    """A service or secret list: filtered on the agent label, like a container list."""
    return {"filters": _label_filters(policy, query.get("filters", ""))}


def network_list_query(policy: Policy, query: dict[str, str]) -> None:
    """A network list names the agents' network and no other (network.py forwards
    the lookup and cuts its answer to that network)."""
    rule = f"a network list names the {policy.network!r} network, and nothing else"
    if _filters(query.get("filters", ""), "name", rule) != [policy.network]:
        raise Refused(rule)


def task_service(query: dict[str, str]) -> str:
    """The one service a task list filters on (the caller checks it is an agent's)."""
    rule = "a task list filters on one service, and on nothing else"
    services = _filters(query.get("filters", ""), "service", rule)
    if len(services) != 1 or not REF.fullmatch(services[0]):
        raise Refused(rule)
    return services[0]


def task_query(service_id: str) -> dict[str, str]:
    return {"filters": json.dumps({"service": {service_id: True}}, separators=(",", ":"))}


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
