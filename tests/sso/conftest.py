"""One test OpenID provider per package, and Trinity's settings pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import chromium, panel  # noqa: F401 - the browser tests' own
from tests.sso.provider import ADMINS, CLIENT_ID, IdentityProvider

PROVIDER_NAME = "Test IdP"


@pytest.fixture(scope="package")
def idp(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    provider = IdentityProvider(tmp_path_factory.mktemp("idp"), platform_url=live_server.url)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def sso(settings: Any, idp: IdentityProvider) -> IdentityProvider:
    """Single sign-on on, through the test provider; admins are its ADMINS group."""
    settings.TRINITY_OIDC_DISCOVERY_URL = idp.issuer
    settings.TRINITY_OIDC_CLIENT_ID = CLIENT_ID
    settings.TRINITY_OIDC_CLIENT_SECRET = idp.client_secret
    settings.TRINITY_OIDC_ADMIN_GROUP = ADMINS
    settings.TRINITY_OIDC_PROVIDER_NAME = PROVIDER_NAME
    return idp
