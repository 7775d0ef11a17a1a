"""One audit entry per change request (``AuditMiddleware``).

Safe methods pass straight through (no lookup, no query), and so do the turn routes,
whose Execution row is their record. For every other request the route's registered
target (``trinity/audit/registry.py``) is read before the view, read again after it,
and one entry is written when the answer is a success (2xx/3xx) or carried a sign-in
attempt (``trinity/audit/signals.py`` merges those into the request's entry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, ResolverMatch, resolve

from trinity.audit import requests
from trinity.audit.registry import Target
from trinity.audit.rows import row_state
from trinity.audit.services import Actor, Change

logger = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# A turn is recorded by its Execution row (who, when, which agent, what it cost); an
# audit write there would cost the turn path a second insert. Cancel is recorded.
TURN_ROUTES = frozenset({"agent-task", "agent-chat"})
# How many rows one name may mean before the view decides whose (one per owner).
MAX_CANDIDATES = 50


@dataclass
class Pending:
    """What the middleware knows of a request while its view runs; the sign-in
    signals add the event and its actor."""

    match: ResolverMatch | None
    target: Target | None
    before: dict[Any, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    event: str | None = None
    actor: Actor | None = None
    subject: tuple[str, str, str] | None = None  # (object type, id, label)


def _resolve(request: HttpRequest) -> ResolverMatch | None:
    try:
        return resolve(request.path_info)
    except Resolver404:
        return None


class AuditMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method in SAFE_METHODS:
            return self.get_response(request)
        match = _resolve(request)
        if match is not None and match.url_name in TURN_ROUTES:
            return self.get_response(request)
        target = requests.target_of(match)
        pending = Pending(match=match, target=target)
        if target is not None and target.candidates is not None and match is not None:
            pending.before = _states(target.candidates(match.kwargs)[:MAX_CANDIDATES])
        request.audit_pending = pending  # type: ignore[attr-defined]
        response = self.get_response(request)
        if _recorded(response, pending):
            try:
                _record(request, response, pending)
            except Exception:  # the change is made; a lost entry must not turn it into a 500
                logger.exception("audit entry not written for %s %s", request.method, request.path)
        return response


def _recorded(response: HttpResponseBase, pending: Pending) -> bool:
    if pending.event is not None:  # a sign-in, failed or not, or a sign-out
        return True
    if pending.target is not None and pending.target.events_only:
        return False
    if pending.target is not None and response.status_code in pending.target.unrecorded_statuses:
        return False
    if pending.match is not None and pending.match.namespace == "admin":
        # Django admin redirects after a change it made; a form it shows again (200)
        # with its errors changed nothing.
        return 300 <= response.status_code < 400
    return response.status_code < 400


def _states(rows: Any) -> dict[Any, tuple[Any, dict[str, Any]]]:
    return {row.pk: (row, row_state(row)) for row in rows}


def _record(request: HttpRequest, response: HttpResponseBase, pending: Pending) -> None:
    subject, diff = _subject_and_changes(request, response, pending)
    object_type, object_id, label = subject
    action = pending.event or _action(request, pending, object_type)
    requests.record(
        request,
        actor=pending.actor,
        change=Change(
            action=action,
            object_type=object_type,
            object_id=object_id,
            object_label=label,
            changes=diff,
            status_code=response.status_code,
        ),
    )


def _action(request: HttpRequest, pending: Pending, object_type: str) -> str:
    target = pending.target
    if target is not None and target.action:
        return target.action
    if target is not None and target.verb:
        return f"{object_type}.{target.verb}"
    verb = requests.METHOD_VERBS.get(str(request.method), str(request.method).lower())
    return f"{object_type}.{verb}"


def _subject_and_changes(
    request: HttpRequest, response: HttpResponseBase, pending: Pending
) -> tuple[tuple[str, str, str], dict[str, Any]]:
    target, match = pending.target, pending.match
    if pending.subject is not None:
        return pending.subject, {}
    if target is None or match is None:
        return requests.unknown_subject(request, match), {}
    if target.created is not None and not pending.before:
        created = target.created(getattr(response, "data", None))
        if created is not None:
            return requests.subject(target, created), requests.diff(None, row_state(created))
    if pending.before:
        return requests.chosen_change(request, target, pending.before)
    return (target.object_type, requests.kwargs_id(match), ""), {}
