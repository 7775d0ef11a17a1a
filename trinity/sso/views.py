"""The provider's sign-in, start and callback (mozilla-django-oidc's views on Trinity's
settings), and what the panel needs to know before anyone signs in."""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from trinity.sso.config import START_PATH, provider_name, sso_enabled
from trinity.sso.provider import ProviderUnavailable, provider_get
from trinity.sso.settings_map import FAILURE_URL, sso_setting

logger = logging.getLogger(__name__)


def _failed(reason: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(FAILURE_URL.format(reason=reason))


class SsoStart(OIDCAuthenticationRequestView):
    """Send the browser to the provider with a fresh state, nonce and PKCE challenge
    (kept in the session for the callback). 404 while single sign-on is off."""

    get_settings = staticmethod(sso_setting)

    def __init__(self, **kwargs: Any) -> None:
        # Not the library's: it reads the endpoint at construction; here, per request.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_get().authorization_endpoint
        except ProviderUnavailable as exc:
            logger.warning("sign-in with the provider could not start: %s", exc)
            return _failed("unavailable")
        self.OIDC_RP_CLIENT_ID = settings.TRINITY_OIDC_CLIENT_ID
        return super().get(request)


class SsoCallback(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back: the code is exchanged (with the PKCE
    verifier), the ID token checked, the account signed in, and the browser sent to the
    panel; on any failure to the panel with ``?sso_error=`` (denied, inactive, failed,
    unavailable)."""

    get_settings = staticmethod(sso_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            return super().get(request)
        except ProviderUnavailable as exc:
            logger.warning("sign-in with the provider failed: %s", exc)
            return _failed("unavailable")
        except (SuspiciousOperation, requests.RequestException) as exc:
            # The class only: a token endpoint's error body is the provider's to log.
            logger.warning("sign-in with the provider failed: %s", type(exc).__name__)
            return _failed("failed")

    def login_failure(self) -> HttpResponse:
        if self.request.GET.get("error"):
            return _failed("denied")
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return _failed("inactive")
        return _failed("failed")


@require_GET
@never_cache
def auth_options(request: HttpRequest) -> JsonResponse:
    """How one may sign in, for the panel's sign-in page (no session needed):
    ``{sso: {enabled, label, start_url}, local_passwords}``."""
    enabled = sso_enabled()
    return JsonResponse(
        {
            "sso": {
                "enabled": enabled,
                "label": provider_name() if enabled else "",
                "start_url": START_PATH if enabled else "",
            },
            "local_passwords": bool(settings.TRINITY_LOCAL_PASSWORDS),
        }
    )
