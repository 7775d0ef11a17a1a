"""Which engine call a request-target names, read as the engine's router reads it.

The engine routes on the decoded, cleaned path (``/v{version}/containers/...``) and
reads the query with Go's url.ParseQuery (the first of repeated names; ``+`` is a
space; a bad escape or a ``;`` is an error). Rather than agree with it on every odd
spelling, a target is taken only in the plain form the SDK sends:

- origin form (``/...``), the path of letters, digits and ``/._-`` only: no percent
  escape, no ``//``, ``.`` or ``..`` segment (the engine would decode or redirect it);
- an optional version prefix ``/v<major>.<minor>``, at least MIN_API_VERSION;
- one of the routes below (ROUTES), with the method it has;
- a query of the names that route takes, each at most once, escapes well formed.

``Call.target`` is what is forwarded: the version, the path and a query rebuilt from
the values read (see queries.py), never the client's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from urllib.parse import unquote_to_bytes, urlencode

from .policy import MIN_API_VERSION, Refused, shown

# The object a path names: an id, a name or an id prefix, as the engine takes them.
_REF_TEXT = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
REF = re.compile(_REF_TEXT)


@dataclass(frozen=True)
class Route:
    """One engine call the proxy forwards: its name, method, path after the version
    (``{ref}`` for the object it names) and the query names it takes (what the SDK
    sends; queries.py reads the values)."""

    name: str
    method: str
    path: str
    query: frozenset[str] = frozenset()

    def pattern(self) -> re.Pattern[str]:
        head, _, tail = self.path.partition("{ref}")
        ref = f"(?P<ref>{_REF_TEXT})" if "{ref}" in self.path else ""
        return re.compile(re.escape(head) + ref + re.escape(tail))


def _names(*names: str) -> frozenset[str]:
    return frozenset(names)


ROUTES = (
    Route("ping", "GET", "/_ping"),
    Route("ping", "HEAD", "/_ping"),
    Route("version", "GET", "/version"),
    # the docker runtime's containers
    Route("create", "POST", "/containers/create", _names("name")),
    Route(
        "list", "GET", "/containers/json", _names("all", "limit", "size", "trunc_cmd", "filters")
    ),
    Route("inspect", "GET", "/containers/{ref}/json", _names("size")),
    Route("start", "POST", "/containers/{ref}/start"),
    Route("stop", "POST", "/containers/{ref}/stop", _names("t")),
    Route("remove", "DELETE", "/containers/{ref}", _names("v", "force", "link")),
    # the swarm runtime's network, secrets, services, tasks and nodes
    Route("network_list", "GET", "/networks", _names("filters")),
    Route("network_create", "POST", "/networks/create"),
    Route("secret_create", "POST", "/secrets/create"),
    Route("secret_list", "GET", "/secrets", _names("filters")),
    Route("secret_remove", "DELETE", "/secrets/{ref}"),
    Route("service_create", "POST", "/services/create"),
    Route("service_list", "GET", "/services", _names("filters")),
    Route("service_inspect", "GET", "/services/{ref}"),
    Route("service_remove", "DELETE", "/services/{ref}"),
    Route("task_list", "GET", "/tasks", _names("filters")),
    Route("node_inspect", "GET", "/nodes/{ref}"),
)
_MATCHERS = tuple((route, route.pattern()) for route in ROUTES)
_PATHS = {route.name: route.path for route in ROUTES}
_PATH = re.compile(r"/[A-Za-z0-9._/-]*")
_VERSIONED = re.compile(r"/v[0-9]")
_VERSION = re.compile(r"/v(?P<major>[0-9]{1,3})\.(?P<minor>[0-9]{1,3})(?P<rest>/.*)")
_BAD_SEGMENT = re.compile(r"//|/\.{1,2}(/|$)")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class Call:
    """One engine call: its route's name, the version prefix as sent (``""`` or
    ``/v1.41``), the object the path names (when it names one) and the query's
    values."""

    route: str
    version: str
    ref: str | None = None
    query: dict[str, str] = field(default_factory=dict)

    def path(self) -> str:
        return _PATHS[self.route].replace("{ref}", self.ref or "")

    def target(self) -> str:
        query = f"?{urlencode(self.query)}" if self.query else ""
        return f"{self.version}{self.path()}{query}"

    def with_query(self, query: dict[str, str], *, ref: str | None = None) -> Call:
        """The same call with ``query`` (and on object ``ref``, when given)."""
        return replace(self, query=query, ref=ref or self.ref)


def _unescape(text: str) -> str:
    if _ESCAPE.search(text):
        raise Refused("the query holds a malformed percent escape", 400)
    try:
        return unquote_to_bytes(text.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("the query is not UTF-8", 400) from None


def read_query(raw: str, names: frozenset[str]) -> dict[str, str]:
    """The query's values by name; each of ``names`` at most once, no other name."""
    if ";" in raw:
        raise Refused("the query holds a ';' (the engine refuses it as a separator)", 400)
    values: dict[str, str] = {}
    for pair in raw.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        name = _unescape(name)
        if name not in names:
            raise Refused(f"the query parameter {shown(name)} is not one this call takes")
        if name in values:
            raise Refused(f"the query parameter {shown(name)} is repeated", 400)
        values[name] = _unescape(value)
    return values


def _version(path: str) -> tuple[str, str]:
    """(the version prefix, the path after it); refuses a version below the minimum."""
    if not _VERSIONED.match(path):
        return "", path
    match = _VERSION.fullmatch(path)
    if match is None:
        raise Refused("the API version prefix is not /v<major>.<minor>", 400)
    version = (int(match["major"]), int(match["minor"]))
    if version < MIN_API_VERSION:
        raise Refused(
            f"API versions below {'.'.join(map(str, MIN_API_VERSION))} are not forwarded "
            "(the engine reads their requests differently)"
        )
    return f"/v{version[0]}.{version[1]}", match["rest"]


def read_call(method: str, raw_target: str) -> Call:
    """The call ``method raw_target`` names; raises Refused (400 for a target the proxy
    cannot read as the engine would, 403 for a call it does not forward)."""
    path, _, raw_query = raw_target.partition("?")
    if not _PATH.fullmatch(path) or _BAD_SEGMENT.search(path) or "#" in raw_query:
        raise Refused(f"the request target {shown(raw_target)} is not in plain form", 400)
    version, rest = _version(path)
    for route, pattern in _MATCHERS:
        match = pattern.fullmatch(rest)
        if match is not None and method == route.method:
            ref = match.groupdict().get("ref")
            return Call(route.name, version, ref, read_query(raw_query, route.query))
    raise Refused("not an agent runtime call")
