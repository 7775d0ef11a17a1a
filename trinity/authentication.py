"""Sign-in: the client's address, failure throttling, and the API's token authentication.

Its own module because ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`` names the
authentication class, and DRF loads it while importing its views: a module that
imports views itself (``trinity.api``) cannot hold it.

Three doors share one set of failure counts (``trinity.sign_in_throttle``): the panel's
login (``trinity.panel``), Django admin's login (``trinity.admin``) and API tokens. Every
key is an address the platform itself saw (``client_address``), a username, or both: a
request can name anyone and an address can be shared, so a count that someone else
can fill never locks a user out of an address they have signed in from before
(``password_sign_in_refusal``).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.utils import timezone
from knox.auth import TokenAuthentication
from knox.settings import CONSTANTS
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from trinity import sign_in_throttle as throttle

logger = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


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
    forwarded_for = str(meta.get("HTTP_X_FORWARDED_FOR") or "")
    if forwarded_for and not settings.TRINITY_TRUSTED_PROXIES:
        _forwarded_for_unread()
    return forwarded_client(
        remote_addr=str(meta.get("REMOTE_ADDR") or ""),
        forwarded_for=forwarded_for,
        trusted=settings.TRINITY_TRUSTED_PROXIES,
    )


PROXY_UNNAMED = (
    "{why}, but TRINITY_TRUSTED_PROXIES is unset: every client counts as the proxy's "
    "address, so one client's failed sign-ins count against all of them (and the "
    "platform cannot tell which client a log line is about). Set it to the proxy's "
    "address or network."
)


def proxy_warning(*, https: bool, trusted: Sequence[IPNetwork]) -> str | None:
    """What to say at startup when a proxy surely forwards to this process (with
    ``TRINITY_HTTPS`` a TLS proxy does) but none is named; None otherwise. Pure."""
    if https and not trusted:
        return PROXY_UNNAMED.format(why="TRINITY_HTTPS is on, so a TLS proxy forwards here")
    return None


@functools.cache
def _forwarded_for_unread() -> None:
    # Once per process (a log line, not a decision): the first request that carries
    # X-Forwarded-For without a trusted proxy named. Any client can send the header,
    # so this is a hint, never acted on.
    logger.warning(
        PROXY_UNNAMED.format(why="A request carried X-Forwarded-For (a proxy forwards here?)")
    )


def _password_keys(address: str, username: str) -> tuple[str, str, str, str]:
    return (
        throttle.pair_key(address, username),
        throttle.account_key(username),
        throttle.address_key(address),
        throttle.known_address_key(username, address),
    )


def password_sign_in_refusal(*, request: Any, username: str) -> float | None:
    """Seconds to wait before a password for ``username`` may be checked, else None.

    Three counts (``trinity.sign_in_throttle``), read in one round trip: this account
    from this address refuses always; this account from anywhere, and the distinct
    accounts failing from this address, refuse only where the account has not signed
    in from this address in the last 30 days (``password_sign_in_succeeded``): anyone
    can send failures in someone's name or from a shared address, and those must lock
    out neither that someone nor the others who sign in there.
    """
    address, now, limit = client_address(request), time.time(), throttle.limit()
    pair, account, spray, known = _password_keys(address, username)
    counts = throttle.counts_read([pair, account, spray, known])
    wait = throttle.refusal_wait(counts.entries(pair, now=now), now=now, limit=limit)
    if wait is not None:
        return wait
    waits = [
        w
        for w in (
            throttle.refusal_wait(counts.entries(account, now=now), now=now, limit=limit),
            throttle.refusal_wait(
                counts.entries(spray, now=now), now=now, limit=limit, distinct=True
            ),
        )
        if w is not None
    ]
    if not waits or counts.holds(known):
        return None
    return max(waits)


def password_sign_in_failed(*, request: Any, username: str) -> None:
    """Count a wrong password (or unknown username): against this account from this
    address, this account, and this address (as one more account failing there)."""
    address, now = client_address(request), time.time()
    pair, account, spray, _ = _password_keys(address, username)
    counts = throttle.counts_read([pair, account, spray])
    whose = throttle.account_of(username)
    throttle.failures_record(counts, {pair: "", account: "", spray: whose}, now=now)


def password_sign_in_succeeded(*, request: Any, username: str) -> None:
    """Remember this address as one ``username`` signs in from (see the refusal)."""
    key = throttle.known_address_key(username, client_address(request))
    throttle.known_remember(key, now=time.time())


class ThrottledTokenAuthentication(TokenAuthentication):
    """knox's digest-token authentication (``Authorization: Token <key>``), refused
    unchecked (429 with ``Retry-After``) after too many wrong tokens from one address,
    unless the presented token has authenticated from that address in the last 30
    days (``trinity.sign_in_throttle``): a neighbour sending wrong tokens from a shared
    address locks out no token its users already use there.

    Keyed by address only: a token names nobody until it matches, so failures cannot be
    sent in a token holder's name, and with ``client_address`` an address cannot be
    borrowed through ``X-Forwarded-For``. The count and the token's mark are one read;
    the mark is rewritten at most once a day.
    """

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != self.authenticate_header(request).lower().encode():
            return None  # no token offered: nothing to guess
        presented = auth[1].decode(errors="replace") if len(auth) == 2 else ""
        address, now = client_address(request), time.time()
        count = throttle.token_address_key(address)
        known = throttle.known_token_key(presented[: CONSTANTS.TOKEN_KEY_LENGTH], address)
        counts = throttle.counts_read([count, known])
        wait = throttle.refusal_wait(
            counts.entries(count, now=now), now=now, limit=throttle.limit()
        )
        if wait is not None and not counts.holds(known):
            raise Throttled(wait=wait, detail="Too many failed sign-ins; try again later.")
        try:
            authenticated = super().authenticate(request)
        except AuthenticationFailed:
            throttle.failures_record(counts, {count: ""}, now=now)
            raise
        stored = (counts.values or {}).get(known)
        if counts.values is not None and not throttle.known_is_fresh(stored, now=now):
            throttle.known_remember(known, now=now)
        return authenticated

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
