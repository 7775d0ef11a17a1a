"""Sign-out's part at the provider."""

from __future__ import annotations

from django.contrib.auth import BACKEND_SESSION_KEY
from django.http import HttpRequest

from trinity.sso.config import sso_enabled
from trinity.sso.provider import end_session_url

SSO_BACKEND = "trinity.sso.backends.SsoBackend"


def provider_sign_out_url(request: HttpRequest) -> str | None:
    """Where to end the session at the provider too, for a session the provider
    started (read before the session ends); None for a password session, or when the
    provider offers no end-session endpoint."""
    if not sso_enabled() or request.session.get(BACKEND_SESSION_KEY) != SSO_BACKEND:
        return None
    return end_session_url(post_logout_redirect_uri=request.build_absolute_uri("/"))
