"""The two ways to sign in: a password (unless turned off) and the provider.

Django asks every backend on every ``authenticate()`` call, so neither reads the network
unless the request is the provider's callback.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from trinity import clock
from trinity.sso.claims import id_token_problem
from trinity.sso.config import local_password_allowed, sso_enabled
from trinity.sso.provider import provider_get
from trinity.sso.services import sso_identity_sign_in
from trinity.sso.settings_map import sso_setting


class LocalPasswordBackend(ModelBackend):
    """Django's username and password, refused unchecked for everyone but the
    break-glass users while local passwords are off (``TRINITY_LOCAL_PASSWORDS``). The
    panel's and admin's logins say why before they get here; this is the floor any
    other password path stands on."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        name = username if username is not None else kwargs.get(get_user_model().USERNAME_FIELD)
        if name is None or not local_password_allowed(str(name)):
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class SsoBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's code flow with the provider read from its discovery
    document, RS256 against its JWKS, and the ID token's issuer and audience checked
    (the library leaves the audience unchecked)."""

    get_settings = staticmethod(sso_setting)
    OIDC_RP_SIGN_ALGO = "RS256"
    OIDC_RP_IDP_SIGN_KEY = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's: it reads the endpoints here, and Django builds this backend
        # for every password sign-in too. They are read when a callback needs them.
        self.UserModel = get_user_model()

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:  # noqa: N802 - the library's name
        return provider_get().token_endpoint

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:  # noqa: N802
        return provider_get().userinfo_endpoint

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:  # noqa: N802
        return provider_get().jwks_uri

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:  # noqa: N802
        return str(settings.TRINITY_OIDC_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:  # noqa: N802
        return str(settings.TRINITY_OIDC_CLIENT_SECRET)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        """The user the provider's callback vouches for, else None (any other request)."""
        if not sso_enabled() or request is None or "nonce" not in kwargs:
            return None
        if request.path != reverse("sso-callback"):
            return None
        return super().authenticate(request, **kwargs)

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        provider = provider_get()
        problem = id_token_problem(
            payload, issuer=provider.issuer, client_id=str(settings.TRINITY_OIDC_CLIENT_ID)
        )
        if problem:
            raise SuspiciousOperation(problem)
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload["sub"]:
            # OIDC Core 5.3.2: the userinfo's subject must be the ID token's.
            raise SuspiciousOperation("the userinfo names another subject")
        return sso_identity_sign_in(
            issuer=provider.issuer, claims={**payload, **userinfo}, now=clock.now()
        )

    def get_user(self, user_id: Any) -> Any:
        # Django's check, which the library drops: a deactivated account's session ends.
        return ModelBackend.get_user(self, user_id)
