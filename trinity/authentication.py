"""Sign-in throttling, and the API's token authentication (knox's digest tokens) that uses it.

Its own module because ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`` names the
authentication class, and DRF loads it while importing its views: a module that
imports views itself (``trinity.api``) cannot hold it.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.utils import timezone
from knox.auth import TokenAuthentication
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)


class SignInFailureThrottle(SimpleRateThrottle):
    """Failed sign-ins (a wrong password, an unknown token) for one key, over a sliding
    window (``DEFAULT_THROTTLE_RATES["sign_in_failures"]``, e.g. 10 a minute).

    ``allow_request`` is asked before the credential is checked and records nothing;
    ``record_failure`` after a check failed. Once the window holds the limit, the next
    attempt is refused unchecked: no password hash runs, no token is looked up.

    DRF's throttles rather than django-axes: one mechanism for the session login and
    token authentication (axes knows only ``authenticate()``), no tables or middleware,
    and the count in the default cache, which is Redis or the database cache, so every
    web process shares it. Like DRF's own throttles it reads and writes the history
    without a lock: racing failures may undercount by the number of concurrent ones.
    A cache that does not answer lets the attempt through (and logs it): sign-in must
    not depend on the cache being up.
    """

    scope = "sign_in_failures"

    def __init__(self, *, ident: str) -> None:
        super().__init__()
        # Hashed: a username may hold anything, and the cache needs no copy of it.
        digest = hashlib.sha256(ident.encode()).hexdigest()
        self.key: str = self.cache_format % {"scope": self.scope, "ident": digest}
        limit, window = self.parse_rate(self.rate)
        assert limit is not None and window is not None  # settings always give a rate
        self.window: int = window

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.key

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return bool(super().allow_request(request, view))
        except Exception:  # the cache is down: fail open, said out loud
            logger.warning("sign-in throttle: the cache did not answer; not throttling")
            return True

    def throttle_success(self) -> bool:
        return True  # an attempt is counted only once it has failed

    def record_failure(self) -> None:
        try:
            now = self.timer()
            history = [t for t in self.cache.get(self.key, []) if t > now - self.window]
            self.cache.set(self.key, [now, *history], self.window)
        except Exception:
            logger.warning("sign-in throttle: the cache did not answer; failure not counted")


def client_address(request: Any) -> str:
    """The client's address as DRF's throttles identify it (``NUM_PROXIES`` aware)."""
    return str(SignInFailureThrottle(ident="").get_ident(request))


def sign_in_refusal(throttles: list[SignInFailureThrottle], request: Any) -> float | None:
    """Seconds to wait when any of these keys is over its limit, else None."""
    waits = [t.wait() or 1.0 for t in throttles if not t.allow_request(request, None)]
    return max(waits) if waits else None


class ThrottledTokenAuthentication(TokenAuthentication):
    """knox's digest-token authentication (``Authorization: Token <key>``), refused
    unchecked after too many wrong tokens from one address (``SignInFailureThrottle``):
    429 with ``Retry-After``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != self.authenticate_header(request).lower().encode():
            return None  # no token offered: nothing to guess
        throttle = SignInFailureThrottle(ident=f"token-ip:{client_address(request)}")
        wait = sign_in_refusal([throttle], request)
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many failed sign-ins; try again later.")
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.record_failure()
            raise

    def _cleanup_token(self, auth_token: Any) -> bool:
        """True (and the row deleted) when this token has expired.

        knox also sweeps every other token of the user here, one more query on every
        request; expired rows of tokens nobody presents are harmless (a digest, never
        accepted), so only the presented one is looked at.
        """
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False
