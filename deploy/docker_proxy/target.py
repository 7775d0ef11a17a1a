"""Which engine call a request-target names, read as the engine's router reads it.

The engine routes on the decoded, cleaned path (``/v{version}/containers/...``) and
reads the query with Go's url.ParseQuery (the first of repeated names; ``+`` is a
space; a bad escape or a ``;`` is an error). Rather than agree with it on every odd
spelling, a target is taken only in the plain form the SDK sends:

- origin form (``/...``), the path of letters, digits and ``/._-`` only: no percent
  escape, no ``//``, ``.`` or ``..`` segment (the engine would decode or redirect it);
- an optional version prefix ``/v<major>.<minor>``, at least MIN_API_VERSION;
- one of the routes below, with the method it has;
- a query of the names that route takes, each at most once, escapes well formed.

``Call.target`` is what is forwarded: the version, the path and a query rebuilt from
the values read (see queries.py), never the client's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from urllib.parse import unquote_to_bytes, urlencode

from .policy import MIN_API_VERSION, Refused, shown

_REF = r"(?P<ref>[A-Za-z0-9][A-Za-z0-9_.-]{0,127})"
# (method, path after the version, route name)
ROUTES = (
    ("GET", re.compile(r"/_ping"), "ping"),
    ("HEAD", re.compile(r"/_ping"), "ping"),
    ("GET", re.compile(r"/version"), "version"),
    ("POST", re.compile(r"/containers/create"), "create"),
    ("GET", re.compile(r"/containers/json"), "list"),
    ("GET", re.compile(rf"/containers/{_REF}/json"), "inspect"),
    ("POST", re.compile(rf"/containers/{_REF}/start"), "start"),
    ("POST", re.compile(rf"/containers/{_REF}/stop"), "stop"),
    ("DELETE", re.compile(rf"/containers/{_REF}"), "remove"),
)
# The query names each route takes (what the SDK sends; queries.py reads the values).
QUERY_NAMES = {
    "ping": frozenset(),
    "version": frozenset(),
    "create": frozenset({"name"}),
    "list": frozenset({"all", "limit", "size", "trunc_cmd", "filters"}),
    "inspect": frozenset({"size"}),
    "start": frozenset(),
    "stop": frozenset({"t"}),
    "remove": frozenset({"v", "force", "link"}),
}
_PATH = re.compile(r"/[A-Za-z0-9._/-]*")
_VERSIONED = re.compile(r"/v[0-9]")
_VERSION = re.compile(r"/v(?P<major>[0-9]{1,3})\.(?P<minor>[0-9]{1,3})(?P<rest>/.*)")
_BAD_SEGMENT = re.compile(r"//|/\.{1,2}(/|$)")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class Call:
    """One engine call: its route, the version prefix as sent (``""`` or ``/v1.41``),
    the container the path names (when it names one) and the query's values."""

    route: str
    version: str
    ref: str | None = None
    query: dict[str, str] = field(default_factory=dict)

    def path(self) -> str:
        if self.route in ("ping", "version"):
            return "/_ping" if self.route == "ping" else "/version"
        if self.route in ("create", "list"):
            return "/containers/create" if self.route == "create" else "/containers/json"
        suffix = {"inspect": "/json", "start": "/start", "stop": "/stop", "remove": ""}
        return f"/containers/{self.ref}{suffix[self.route]}"

    def target(self) -> str:
        query = f"?{urlencode(self.query)}" if self.query else ""
        return f"{self.version}{self.path()}{query}"

    def with_query(self, query: dict[str, str], *, ref: str | None = None) -> Call:
        """The same call with ``query`` (and on container ``ref``, when given)."""
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
    for route_method, pattern, route in ROUTES:
        match = pattern.fullmatch(rest)
        if match is not None and method == route_method:
            ref = match.groupdict().get("ref")
            return Call(route, version, ref, read_query(raw_query, QUERY_NAMES[route]))
    raise Refused("not an agent runtime call")
