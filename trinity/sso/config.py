"""What single sign-on and password sign-in may do, read from settings at each call
(so a test's settings apply to the live server's threads too)."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

WELL_KNOWN: Final = "/.well-known/openid-configuration"
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
# Where the panel's "Sign in with ..." link starts the provider's sign-in.
START_PATH: Final = "/oidc/authenticate/"


def discovery_document_url(raw: str) -> str:
    """The discovery document's URL for ``raw``: the issuer's URL or the document's."""
    raw = raw.strip()
    if raw.endswith(WELL_KNOWN):
        return raw
    return raw.rstrip("/") + WELL_KNOWN


def expected_issuer(document_url: str) -> str:
    """The issuer a discovery document at ``document_url`` must name (OIDC Discovery
    4.3: the document lives at the issuer plus the well-known path)."""
    return document_url.removesuffix(WELL_KNOWN).rstrip("/")


def check_discovery_url(raw: str) -> None:
    """Raise ImproperlyConfigured unless ``raw`` is https, or http on loopback (tests,
    a provider on the same host): sign-in must not travel in clear."""
    parts = urlsplit(raw)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return
    raise ImproperlyConfigured(
        "TRINITY_OIDC_DISCOVERY_URL must be an https URL (http only on loopback)"
    )


def sso_enabled() -> bool:
    return bool(settings.TRINITY_OIDC_DISCOVERY_URL)


def provider_name() -> str:
    return str(settings.TRINITY_OIDC_PROVIDER_NAME)


def local_password_allowed(username: str) -> bool:
    """Whether ``username`` may sign in with a password: always while local passwords
    are on, else only the break-glass users (``TRINITY_BREAK_GLASS_USERS``)."""
    return bool(settings.TRINITY_LOCAL_PASSWORDS) or username in settings.TRINITY_BREAK_GLASS_USERS


def password_refusal_message() -> str:
    return (
        f"Password sign-in is turned off here. Sign in with {provider_name()} instead "
        f"({START_PATH})."
    )
