"""The provider's discovery document is checked before it is used; the provider's
backend answers only its own callback."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory

from trinity.sso.backends import SsoBackend
from trinity.sso.provider import ProviderUnavailable, provider_of

DOCUMENT_URL = "https://id.example.test/realms/team/.well-known/openid-configuration"
DOCUMENT = {
    "issuer": "https://id.example.test/realms/team",
    "authorization_endpoint": "https://id.example.test/auth",
    "token_endpoint": "https://id.example.test/token",
    "userinfo_endpoint": "https://id.example.test/userinfo",
    "jwks_uri": "https://id.example.test/certs",
}


def test_a_complete_document_gives_the_endpoints() -> None:
    provider = provider_of(
        {**DOCUMENT, "end_session_endpoint": "https://id.example.test/logout"},
        document_url=DOCUMENT_URL,
    )
    assert provider.token_endpoint == "https://id.example.test/token"
    assert provider.end_session_endpoint == "https://id.example.test/logout"
    assert provider_of(DOCUMENT, document_url=DOCUMENT_URL).end_session_endpoint is None


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ({**DOCUMENT, "issuer": "https://evil.test"}, "names issuer"),
        ({k: v for k, v in DOCUMENT.items() if k != "jwks_uri"}, "lacks jwks_uri"),
        ({**DOCUMENT, "token_endpoint": None}, "lacks token_endpoint"),
        ([DOCUMENT], "not a JSON object"),
    ],
)
def test_a_document_that_is_not_this_providers_is_refused(document: Any, why: str) -> None:
    with pytest.raises(ProviderUnavailable, match=why):
        provider_of(document, document_url=DOCUMENT_URL)


def test_the_backend_ignores_a_code_sent_anywhere_but_its_callback(settings: Any) -> None:
    # No provider listens here: an attempt to use the code would fail loudly.
    settings.TRINITY_OIDC_DISCOVERY_URL = "http://127.0.0.1:9/nothing"
    request = RequestFactory().post("/api/auth/login?code=stolen&state=s")
    assert SsoBackend().authenticate(request, nonce="n", code_verifier="v") is None
    settings.TRINITY_OIDC_DISCOVERY_URL = ""
    callback = RequestFactory().get("/oidc/callback/?code=c&state=s")
    assert SsoBackend().authenticate(callback, nonce="n", code_verifier="v") is None
