"""Which object a write route changes, registered by the app that owns the route.

Each app lists its routes in an ``audit_targets`` module (found by
``AuditConfig.ready``), so this package imports none of them: dependencies keep
pointing one way. A route nobody registered is still recorded, as the route and
its URL arguments (``trinity/audit/middleware.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Model, QuerySet

# The rows a route's URL arguments may mean (names are unique per owner, so a name
# can mean several rows until the view has decided whose).
Candidates = Callable[[Mapping[str, Any]], "QuerySet[Any]"]
# The row a create made, from the response's data.
Created = Callable[[Any], Model | None]


@dataclass(frozen=True)
class Target:
    """What a route changes: its ``object_type`` (e.g. ``agent``), an optional ``verb``
    (``start``; else create/update/delete by method), how to find the row before the
    view runs, and how to find a created one after."""

    object_type: str
    verb: str | None = None
    candidates: Candidates | None = None
    created: Created | None = None
    # A fixed action, e.g. ``sign_out``: the route changes no row of its own.
    action: str | None = None
    # How the log names a row when its primary key will not do (a token's is its digest).
    ident: Callable[[Any], str] | None = None
    # Recorded only when a sign-in signal names what happened (a sign-out without a
    # session changes nothing, and anyone could fill the log with them).
    events_only: bool = False
    # Answers that changed nothing and come often: a poll still waiting (202) would
    # fill the log with one entry every few seconds.
    unrecorded_statuses: frozenset[int] = frozenset()


_TARGETS: dict[str, Target] = {}


def register(route: str, target: Target) -> None:
    """Record what the route named ``route`` changes. Raises ValueError when the route
    is registered twice (two apps would disagree about it)."""
    if route in _TARGETS and _TARGETS[route] != target:
        raise ValueError(f"audit target for route {route!r} registered twice")
    _TARGETS[route] = target


def target_for(route: str) -> Target | None:
    return _TARGETS.get(route)


def object_types() -> frozenset[str]:
    """The object types the apps' routes name (``agent``, ``subscription``…), plus
    ``user``, which sign-ins name."""
    return frozenset({"user", *(target.object_type for target in _TARGETS.values())})


def registered_routes() -> frozenset[str]:
    return frozenset(_TARGETS)
