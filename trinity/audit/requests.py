"""What a request tells the audit log: its actor, its source, its address, the
object its route changes, and the entry written for it."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.apps import apps
from django.contrib.admin.utils import unquote
from django.db.models import Model
from django.http import HttpRequest
from django.urls import ResolverMatch
from knox.models import AuthToken

from trinity.audit.models import ActorKind, AuditEntry, Source
from trinity.audit.registry import Target, object_types, target_for
from trinity.audit.rows import changes, row_state, secret_mark, secret_named
from trinity.audit.services import Actor, Change, audit_record
from trinity.authentication import client_address

METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
# Django admin's own pages for one object: /admin/<app>/<model>/<id>/change|delete/.
_ADMIN_OBJECT = re.compile(
    r"^(?P<app>[a-z0-9_]+?)_(?P<model>[a-z0-9]+)_(?P<verb>change|delete|password_change)$"
)
_ADMIN_VERBS = {"change": "update", "delete": "delete", "password_change": "password_change"}


def target_of(match: ResolverMatch | None) -> Target | None:
    """The route's registered target; for Django admin's change and delete pages, the
    model the page edits."""
    if match is None or not match.url_name:
        return None
    if match.namespace == "admin":
        if match.url_name in ("login", "logout"):  # from the sign-in signals alone
            return Target("user", events_only=True)
        return _admin_target(match)
    return target_for(match.url_name)


def _admin_target(match: ResolverMatch) -> Target | None:
    found = _ADMIN_OBJECT.match(str(match.url_name))
    # The object's pages take ``object_id``; a user's password page takes ``id``.
    key = "object_id" if "object_id" in match.kwargs else "id"
    if found is None or key not in match.kwargs:
        return None
    try:
        model = apps.get_model(found["app"], found["model"])
    except LookupError:
        return None
    # The API's name for the model where it has one, so one filter finds a row's
    # changes from the panel and from admin alike; else the app-qualified name.
    name = str(model._meta.model_name)
    return Target(
        object_type=name if name in object_types() else f"{model._meta.app_label}.{name}",
        verb=_ADMIN_VERBS[found["verb"]],
        candidates=lambda kwargs: model._default_manager.filter(pk=unquote(kwargs[key])),
    )


def request_actor(request: HttpRequest) -> Actor:
    """Who sent ``request``, as authenticated by the time its view returned (DRF sets
    ``user`` and ``auth`` on the underlying request)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return Actor(kind=ActorKind.ANONYMOUS)
    auth = getattr(request, "auth", None)
    if isinstance(auth, AuthToken):
        # The first 8 characters of the token, as the admin lists it: names it, unusable.
        return Actor(
            kind=ActorKind.API_TOKEN,
            user_id=user.pk,
            username=user.get_username(),
            token=f"{auth.token_key[:8]}…",
        )
    return Actor(kind=ActorKind.USER, user_id=user.pk, username=user.get_username())


def request_source(request: HttpRequest) -> str:
    if request.path_info.startswith("/admin/"):
        return Source.ADMIN
    if isinstance(getattr(request, "auth", None), AuthToken):
        return Source.API
    return Source.PANEL


def record(request: HttpRequest, *, actor: Actor | None, change: Change) -> AuditEntry:
    """Write ``change`` with what ``request`` says of its actor, source and address."""
    match = getattr(getattr(request, "audit_pending", None), "match", None)
    change.method = str(request.method)
    change.path = request.path_info
    change.route = str(match.view_name) if match is not None else ""
    change.address = client_address(request)
    change.request_id = str(request.META.get("HTTP_X_REQUEST_ID") or uuid.uuid4().hex)
    return audit_record(
        actor=actor or request_actor(request), source=request_source(request), change=change
    )


def label_of(row: Model) -> str:
    for name in ("name", "username", "title"):
        value = getattr(row, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def subject(target: Target, row: Model) -> tuple[str, str, str]:
    if target.ident is not None:
        ident = target.ident(row)
    elif secret_named(row._meta.pk):  # knox's token rows are keyed by their digest
        ident = secret_mark(row.pk) or ""
    else:
        ident = str(row.pk)
    return target.object_type, ident, label_of(row)


def diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    return changes(before, after)


def kwargs_id(match: ResolverMatch) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(match.kwargs.items()))


def unknown_subject(request: HttpRequest, match: ResolverMatch | None) -> tuple[str, str, str]:
    """A route nobody registered: the route's name (else the path) and its arguments."""
    if match is None:
        return request.path_info, "", ""
    return str(match.view_name or request.path_info), kwargs_id(match), ""


def chosen_change(
    request: HttpRequest, target: Target, before: dict[Any, tuple[Any, dict[str, Any]]]
) -> tuple[tuple[str, str, str], dict[str, Any]]:
    """Of the rows the URL could mean, the one the view changed (or deleted), else the
    requester's own, else the first: its subject and its changes."""
    model = type(next(iter(before.values()))[0])
    after = {row.pk: row_state(row) for row in model._default_manager.filter(pk__in=before)}
    changed = [pk for pk, (_, state) in before.items() if after.get(pk) != state]
    user_id = getattr(getattr(request, "user", None), "pk", None)
    owned = [pk for pk, (row, _) in before.items() if _owner_id(row) == user_id]
    pk = (changed or owned or list(before))[0]
    row, state = before[pk]
    return subject(target, row), changes(state, after.get(pk))


def _owner_id(row: Model) -> Any:
    if hasattr(row, "owner_id"):
        return row.owner_id
    agent = getattr(row, "agent", None)
    return getattr(agent, "owner_id", None)
