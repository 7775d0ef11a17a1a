"""The settings mozilla-django-oidc reads, answered from Trinity's (``TRINITY_OIDC_*``)
and fixed where a choice would weaken sign-in: PKCE with S256, a nonce, RS256, no
unsigned tokens, no tokens kept in the session."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from mozilla_django_oidc.utils import import_from_settings

# Where a failed sign-in lands: the panel, which says why (``sso_error``).
FAILURE_URL = "/?sso_error={reason}"

_FIXED: dict[str, Any] = {
    "OIDC_RP_SIGN_ALGO": "RS256",
    "OIDC_USE_PKCE": True,
    "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
    "OIDC_USE_NONCE": True,
    "OIDC_ALLOW_UNSECURED_JWT": False,
    "OIDC_VERIFY_SSL": True,
    "OIDC_VERIFY_KID": True,
    "OIDC_TIMEOUT": 10,
    "OIDC_STORE_ACCESS_TOKEN": False,
    "OIDC_STORE_ID_TOKEN": False,
    "OIDC_CREATE_USER": True,
    "OIDC_TOKEN_USE_BASIC_AUTH": False,
    "OIDC_AUTHENTICATION_CALLBACK_URL": "sso-callback",
    "OIDC_REDIRECT_FIELD_NAME": "next",
    "OIDC_REDIRECT_ALLOWED_HOSTS": [],
    "LOGIN_REDIRECT_URL": "/",
    "LOGIN_REDIRECT_URL_FAILURE": FAILURE_URL.format(reason="failed"),
}


def sso_setting(attr: str, *default: Any) -> Any:
    """The value mozilla-django-oidc gets for the setting ``attr``."""
    if attr in _FIXED:
        return _FIXED[attr]
    if attr == "OIDC_RP_CLIENT_ID":
        return settings.TRINITY_OIDC_CLIENT_ID
    if attr == "OIDC_RP_CLIENT_SECRET":
        return settings.TRINITY_OIDC_CLIENT_SECRET
    if attr == "OIDC_RP_SCOPES":
        return settings.TRINITY_OIDC_SCOPES
    return import_from_settings(attr, *default)
