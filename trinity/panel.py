"""The settings panel: the built Vue app's page at ``/`` and the session-auth API it uses.

The panel signs in with Django's session (the same one the admin uses), so every
state-changing request carries the CSRF token from the ``csrftoken`` cookie. These are
plain Django views on purpose: DRF's APIView exempts itself from CSRF and only enforces
it for requests that are already authenticated, which would leave login unprotected.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate, login, logout
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect, ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from trinity.authentication import (
    password_sign_in_failed,
    password_sign_in_refusal,
    password_sign_in_succeeded,
)
from trinity.sso.config import local_password_allowed, password_refusal_message
from trinity.sso.logout import provider_sign_out_url

NOT_BUILT = (
    "The settings panel has not been built. Run `cd frontend && npm ci && npm run build`, "
    "then `.venv/bin/python manage.py collectstatic --noinput` (or `make run`, which does both).\n"
)

# The built app loads only its own hashed script and stylesheet and talks only to this
# origin. Chart.js and Vue set styles through the CSSOM, which style-src does not govern.
PANEL_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

BAD_CREDENTIALS = "Those credentials were not accepted. Check them and try again."


def _me(user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    # Admin means staff, exactly as trinity.api.IsAdmin decides on the server.
    return {"username": user.get_username(), "is_admin": bool(getattr(user, "is_staff", False))}


@require_GET
@never_cache
@ensure_csrf_cookie
def index(request: HttpRequest) -> HttpResponse:
    """Serve the built app's index.html, or a 503 that says how to build it."""
    index_html = settings.PANEL_DIST_DIR / "index.html"
    try:
        html = index_html.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HttpResponse(NOT_BUILT, status=503, content_type="text/plain; charset=utf-8")
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = PANEL_CSP
    return response


@require_GET
@never_cache
@ensure_csrf_cookie
def auth_csrf(request: HttpRequest) -> HttpResponse:
    """Set the ``csrftoken`` cookie; the body is empty on purpose."""
    return HttpResponse(status=204)


@require_POST
@never_cache
@csrf_protect
def auth_login(request: HttpRequest) -> JsonResponse:
    """Start a session from ``{username, password}``.

    Returns 200 with ``{username, is_admin}``. A wrong username and a wrong password
    get the same 400, so the answer does not reveal which accounts exist. After too
    many failures from one address, or for one username from an address that user has
    not signed in from, 429 with ``Retry-After``, and the password is not checked
    (``trinity.authentication.password_sign_in_refusal``, shared with admin's login).
    While local passwords are off, 403 ``sso_required`` for all but the break-glass
    users, unchecked.
    """
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"detail": "Send a JSON body: {username, password}."}, status=400)
    username = body.get("username") if isinstance(body, dict) else None
    password = body.get("password") if isinstance(body, dict) else None
    if (
        not isinstance(username, str)
        or not isinstance(password, str)
        or not username
        or not password
    ):
        return JsonResponse({"detail": "Enter a username and a password."}, status=400)
    if not local_password_allowed(username):
        return JsonResponse(
            {"detail": password_refusal_message(), "code": "sso_required"}, status=403
        )
    wait = password_sign_in_refusal(request=request, username=username)
    if wait is not None:
        refused = JsonResponse(
            {"detail": "Too many failed sign-ins. Try again later.", "code": "throttled"},
            status=429,
        )
        refused["Retry-After"] = str(math.ceil(wait))
        return refused
    user = authenticate(request, username=username, password=password)
    if user is None:
        password_sign_in_failed(request=request, username=username)
        return JsonResponse({"detail": BAD_CREDENTIALS}, status=400)
    password_sign_in_succeeded(request=request, username=username)
    login(request, user)
    return JsonResponse(_me(user))


@require_POST
@never_cache
@csrf_protect
def auth_logout(request: HttpRequest) -> HttpResponse:
    """End the session (also fine when there is none): 204; for a session the identity
    provider started, 200 with ``{end_session_url}`` when the provider offers one, for
    the browser to end its session there too."""
    at_provider = provider_sign_out_url(request)
    logout(request)
    if at_provider:
        return JsonResponse({"end_session_url": at_provider})
    return HttpResponse(status=204)


@require_GET
@never_cache
def auth_me(request: HttpRequest) -> JsonResponse:
    """``{username, is_admin}`` for the signed-in user, else 401."""
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Not signed in."}, status=401)
    return JsonResponse(_me(request.user))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """JSON for the API (the panel shows ``detail``), Django's own page everywhere else."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "The security token was missing or stale. Reload the page and try again."},
            status=403,
        )
    return django_csrf_failure(request, reason=reason)
