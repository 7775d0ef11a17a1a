"""The provider's discovery document: fetched on first use, then kept an hour.

The one module that reads the provider's configuration. Lazily, not at start: a web
process must come up while the provider is down (password break-glass still works),
and a failed read is retried on the next sign-in instead of being remembered.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import httpx
from django.conf import settings

from trinity.sso.config import discovery_document_url, expected_issuer

logger = logging.getLogger(__name__)

KEEP_SECONDS: Final = 3600.0
TIMEOUT_SECONDS: Final = 10.0
REQUIRED: Final = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")


class ProviderUnavailable(Exception):
    """The discovery document could not be read or does not describe a usable provider."""


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None


_kept: dict[str, tuple[float, Provider]] = {}
_lock = threading.Lock()


def provider_of(document: Any, *, document_url: str) -> Provider:
    """The provider a discovery document describes. Raises ProviderUnavailable when it
    misses an endpoint or names an issuer other than the one it was fetched for."""
    if not isinstance(document, dict):
        raise ProviderUnavailable("the discovery document is not a JSON object")
    missing = [name for name in REQUIRED if not isinstance(document.get(name), str)]
    if missing:
        raise ProviderUnavailable(f"the discovery document lacks {', '.join(missing)}")
    issuer = str(document.get("issuer") or "")
    if issuer.rstrip("/") != expected_issuer(document_url):
        raise ProviderUnavailable(f"the discovery document names issuer {issuer!r}")
    end_session = document.get("end_session_endpoint")
    return Provider(
        issuer=issuer,
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        userinfo_endpoint=document["userinfo_endpoint"],
        jwks_uri=document["jwks_uri"],
        end_session_endpoint=end_session if isinstance(end_session, str) else None,
    )


def provider_get() -> Provider:
    """The configured provider (kept ``KEEP_SECONDS``). Raises ProviderUnavailable."""
    document_url = discovery_document_url(settings.TRINITY_OIDC_DISCOVERY_URL)
    with _lock:
        kept = _kept.get(document_url)
        if kept is not None and time.monotonic() - kept[0] < KEEP_SECONDS:
            return kept[1]
    try:
        answer = httpx.get(document_url, timeout=TIMEOUT_SECONDS, follow_redirects=False)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderUnavailable(f"reading {document_url} failed: {type(exc).__name__}") from exc
    provider = provider_of(document, document_url=document_url)
    with _lock:
        _kept[document_url] = (time.monotonic(), provider)
    return provider


def end_session_url(*, post_logout_redirect_uri: str) -> str | None:
    """Where the browser ends its session at the provider, then comes back; None when
    the provider has no end-session endpoint or cannot be read now. No ID token is
    sent as a hint: none is kept (the provider may ask the person to confirm)."""
    try:
        endpoint = provider_get().end_session_endpoint
    except ProviderUnavailable:
        logger.warning("sign-out: the provider's configuration could not be read")
        return None
    if endpoint is None:
        return None
    query = urlencode(
        {
            "client_id": settings.TRINITY_OIDC_CLIENT_ID,
            "post_logout_redirect_uri": post_logout_redirect_uri,
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
