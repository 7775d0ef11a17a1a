"""Sign-in: the client's address, failure throttling, and the API's token authentication.

Its own module because ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`` names the
authentication class, and DRF loads it while importing its views: a module that
imports views itself (``trinity.api``) cannot hold it.

Three doors share one throttle (``SignInFailureThrottle``): the panel's login
(``trinity.panel``), Django admin's login (``trinity.admin``) and API tokens. Every key
is an address the platform itself saw (``client_address``), or a username: a request
can name anyone, so a username's count never locks that user out of an address they
have signed in from before (``password_sign_in_refusal``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from knox.auth import TokenAuthentication
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# How long an address a user signed in from stays theirs: while their username's count
# is over the limit (someone guessing in their name), that address still gets a try.
KNOWN_ADDRESS_SECONDS = 30 * 24 * 3600


def _parse_address(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def forwarded_client(*, remote_addr: str, forwarded_for: str, trusted: Sequence[IPNetwork]) -> str:
    """The client's address: the rightmost hop that is not one of the ``trusted`` proxies.

    ``remote_addr`` is the peer of the socket; ``forwarded_for`` the ``X-Forwarded-For``
    header as received. Each trusted proxy appends the address it saw, so reading from
    the right, everything up to the first untrusted hop was written by a proxy of ours;
    anything left of it was written by the client and is ignored (a client rotating the
    header gets no new identity). With no trusted proxies the header is never read. A
    hop that is not an address ends the walk at the proxy that reported it. Pure.
    """
    client = remote_addr
    hops = [hop for hop in forwarded_for.split(",") if hop.strip()] if forwarded_for else []
    for hop in [remote_addr, *reversed(hops)]:
        address = _parse_address(hop)
        if address is None:
            return client
        client = str(address)
        if not any(address in network for network in trusted):
            return client
    return client  # every hop is a proxy of ours: the leftmost is the nearest to the client


def client_address(request: Any) -> str:
    """The client's address as this platform saw it (``TRINITY_TRUSTED_PROXIES`` aware):
    what the throttles count and what a log line names."""
    meta = request.META
    return forwarded_client(
        remote_addr=str(meta.get("REMOTE_ADDR") or ""),
        forwarded_for=str(meta.get("HTTP_X_FORWARDED_FOR") or ""),
        trusted=settings.TRINITY_TRUSTED_PROXIES,
    )


class SignInFailureThrottle(SimpleRateThrottle):
    """Failed sign-ins (a wrong password, an unknown token) for one key, over a sliding
    window (``DEFAULT_THROTTLE_RATES["sign_in_failures"]``, e.g. 10 a minute).

    ``allow_request`` is asked before the credential is checked and records nothing;
    ``record_failure`` after a check failed. Once the window holds the limit, the next
    attempt is refused unchecked: no password hash runs, no token is looked up.

    DRF's throttles rather than django-axes: one mechanism and one count for the panel's
    login, admin's login and token authentication (axes knows only ``authenticate()``,
    so tokens would need a second one), no tables or middleware, and the count in the
    default cache, which is Redis or the database cache, so every web process shares
    it. Like DRF's own throttles it reads and writes the history without a lock: racing
    failures may undercount by the number of concurrent ones. A cache that does not
    answer lets the attempt through (and logs it): sign-in must not depend on the cache.
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


def sign_in_refusal(throttles: list[SignInFailureThrottle], request: Any) -> float | None:
    """Seconds to wait when any of these keys is over its limit, else None."""
    waits = [t.wait() or 1.0 for t in throttles if not t.allow_request(request, None)]
    return max(waits) if waits else None


def _known_address_key(username: str, address: str) -> str:
    ident = hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()
    return f"sign_in_known_address_{ident}"


def _password_throttles(request: Any, username: str) -> tuple[SignInFailureThrottle, ...]:
    return (
        SignInFailureThrottle(ident=f"login-ip:{client_address(request)}"),
        SignInFailureThrottle(ident=f"login-user:{username.casefold()}"),
    )


def password_sign_in_refusal(*, request: Any, username: str) -> float | None:
    """Seconds to wait before a password for ``username`` may be checked, else None.

    Two counts, shared by the panel's and admin's login: this address (one address
    guessing many names) and this username (a guess spread over many addresses). The
    username's count alone does not refuse an address the user signed in from before
    (``password_sign_in_succeeded``): anyone can send failures in a victim's name, and
    those must not lock the victim out. That address is still held by its own count.
    """
    by_address, by_username = _password_throttles(request, username)
    wait = sign_in_refusal([by_address], request)
    if wait is not None:
        return wait
    wait = sign_in_refusal([by_username], request)
    if wait is None:
        return None
    try:
        known = cache.get(_known_address_key(username, client_address(request))) is not None
    except Exception:
        logger.warning("sign-in throttle: the cache did not answer; not throttling")
        return None
    return None if known else wait


def password_sign_in_failed(*, request: Any, username: str) -> None:
    """Count a wrong password (or unknown username) against the address and the name."""
    for throttle in _password_throttles(request, username):
        throttle.record_failure()


def password_sign_in_succeeded(*, request: Any, username: str) -> None:
    """Remember this address as one ``username`` signs in from (see the refusal)."""
    try:
        cache.set(
            _known_address_key(username, client_address(request)),
            timezone.now().isoformat(),
            KNOWN_ADDRESS_SECONDS,
        )
    except Exception:
        logger.warning("sign-in throttle: the cache did not answer; address not remembered")


class ThrottledTokenAuthentication(TokenAuthentication):
    """knox's digest-token authentication (``Authorization: Token <key>``), refused
    unchecked after too many wrong tokens from one address (``SignInFailureThrottle``):
    429 with ``Retry-After``.

    Keyed by address only: a token names nobody until it matches, so failures cannot be
    sent in a token holder's name, and with ``client_address`` an address cannot be
    borrowed through ``X-Forwarded-For``.
    """

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
