"""The platform's own write routes, for the audit log (``trinity/audit/registry.py``):
API tokens, notification channels, sign-in and sign-out."""

from __future__ import annotations

from typing import Any

from knox.models import AuthToken

from trinity.audit.registry import Target, register
from trinity.models import NotificationChannel


def _channel(kwargs: Any) -> Any:
    return NotificationChannel.objects.filter(pk=kwargs["pk"])


def _channel_created(data: Any) -> NotificationChannel | None:
    if not isinstance(data, dict) or "id" not in data:
        return None
    return NotificationChannel.objects.filter(pk=data["id"]).first()


def _token_issued(data: Any) -> AuthToken | None:
    # The response carries the token itself; only its username is read from it.
    if not isinstance(data, dict) or "username" not in data:
        return None
    return AuthToken.objects.filter(user__username=data["username"]).order_by("-created").first()


def _token_ident(token: AuthToken) -> str:
    # A token's primary key is its digest: named by its first 8 characters instead, as
    # the admin lists it and as an entry names the token an actor used.
    return f"{token.token_key[:8]}…"


register("auth-tokens", Target("api_token", created=_token_issued, ident=_token_ident))
register("notification-channel-list", Target("notification_channel", created=_channel_created))
register("notification-channel-detail", Target("notification_channel", candidates=_channel))
register(
    "notification-channel-test", Target("notification_channel", verb="test", candidates=_channel)
)
# Recorded from the sign-in signals alone (trinity/audit/signals.py): a sign-out
# without a session sends none and changes nothing.
register("auth-login", Target("user", events_only=True))
register("auth-logout", Target("user", events_only=True))
