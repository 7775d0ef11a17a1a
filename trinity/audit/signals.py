"""Sign-ins, failed sign-ins and sign-outs, from Django's auth signals: the panel's
login, Django admin's and single sign-on's callback all send them.

Inside a request the middleware audits (a login POST), the event becomes that
request's one entry; anywhere else (the sign-on callback is a GET) it is an entry of
its own. A failed sign-in names the attempted username as text, never a password.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

from trinity.audit import requests
from trinity.audit.models import ActorKind
from trinity.audit.services import Actor, Change


def _event(request: Any, *, event: str, actor: Actor, label: str) -> None:
    if request is None:  # authenticate() without a request: nothing to say where from
        return

    subject = ("user", str(actor.user_id or ""), label)
    pending = getattr(request, "audit_pending", None)
    if pending is not None:
        pending.event, pending.actor, pending.subject = event, actor, subject
        return
    object_type, object_id, object_label = subject
    requests.record(
        request,
        actor=actor,
        change=Change(
            action=event, object_type=object_type, object_id=object_id, object_label=label
        ),
    )


def _user_actor(user: Any) -> Actor:
    return Actor(kind=ActorKind.USER, user_id=user.pk, username=user.get_username())


def on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    _event(request, event="sign_in", actor=_user_actor(user), label=user.get_username())


def on_logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    _event(request, event="sign_out", actor=_user_actor(user), label=user.get_username())


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
) -> None:
    attempted = str(credentials.get("username") or "")[:150]
    _event(
        request,
        event="sign_in.failed",
        actor=Actor(kind=ActorKind.ANONYMOUS, username=attempted),
        label=attempted,
    )


def connect() -> None:
    user_logged_in.connect(on_logged_in, dispatch_uid="audit-sign-in")
    user_logged_out.connect(on_logged_out, dispatch_uid="audit-sign-out")
    user_login_failed.connect(on_login_failed, dispatch_uid="audit-sign-in-failed")
