"""The one module that talks to webhook receivers (Slack-compatible hooks, JSON POSTs).

A POST either reaches a receiver that answers 2xx (delivered) or yields a
``PostResult`` saying why not; it never raises for a receiver's fault and never puts
the URL into a result, an exception or a log line (the URL is the credential).

Destinations: a webhook URL is typed by an admin but its host's DNS is not the
admin's, and the platform sits next to things a public receiver must never reach
(the cloud metadata service, Postgres, Redis, agent servers). So a destination is
resolved here, every address it resolves to must be public (``address_refusal``)
unless the admin lists it (``TRINITY_WEBHOOK_ALLOW``), and the POST connects to the
address that was checked, with the Host header and TLS SNI of the URL's host: no
second resolution an attacker's DNS can answer differently (rebinding). The check
runs when a channel is saved and again on every delivery. Redirects are not
followed. A receiver's body never comes back: only its status code.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx
from django.conf import settings

from trinity.crypto import Secret
from trinity.http import ProcessClient
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
# A receiver gets this long to answer; a slower one is retried later, never waited for.
TOTAL_TIMEOUT = 10.0
ERROR_LENGTH = 300
USER_AGENT = "trinity-notifications/1"

_http = ProcessClient(
    lambda: httpx.Client(
        timeout=httpx.Timeout(TOTAL_TIMEOUT, connect=CONNECT_TIMEOUT),
        # A redirect would send the payload somewhere the admin never configured.
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        # Proxies from the environment do not apply to operator-configured hooks.
        trust_env=False,
    )
)


@dataclass(frozen=True)
class PostResult:
    delivered: bool
    status_code: int | None = None
    error: str = ""
    # Seconds a 429/503 asked us to wait (Retry-After), when it said.
    retry_after: int | None = None
    # A refusal no retry will change (the hook is gone, the payload is refused).
    permanent: bool = False


# Answers worth another try later; any other 4xx means the hook or payload is wrong.
RETRYABLE_4XX = frozenset({408, 425, 429})


def _retry_after(response: httpx.Response) -> int | None:
    raw = response.headers.get("retry-after", "")
    return int(raw) if raw.isdigit() else None


AnyAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# 100.64.0.0/10 is neither "private" nor global in ipaddress's tables; name it.
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class DestinationRefused(Exception):
    """The URL's host is not a destination a webhook may reach; the message says why
    and names the host and address, never the URL's path (the credential)."""


def _embedded_ipv4(address: AnyAddress) -> AnyAddress:
    """The IPv4 address an IPv6 one reaches when it only wraps one (v4-mapped, 6to4,
    Teredo's client, NAT64's well-known prefix); else ``address`` itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _allowed(address: AnyAddress, allow: tuple[str, ...]) -> bool:
    for entry in allow:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue  # a host name: matched on the URL's host, not here
        if address.version == network.version and address in network:
            return True
    return False


def address_refusal(address: str, *, allow: tuple[str, ...]) -> str | None:
    """Why a webhook may not connect to ``address``, or None when it may.

    Pure. Only public unicast addresses pass, unless an entry of ``allow`` (IPs and
    CIDRs; host names are ignored here) contains the address or the IPv4 address it
    wraps. An IPv6 address that wraps an IPv4 one is judged as that IPv4 address.
    """
    literal = ipaddress.ip_address(address)
    target = _embedded_ipv4(literal)
    if _allowed(literal, allow) or _allowed(target, allow):
        return None
    # Order matters: 127/8 and 169.254/16 are "private" too; name the narrower kind.
    if target.is_unspecified:
        return "unspecified"
    if target.is_loopback:
        return "loopback"
    if target.is_link_local:
        return "link-local"
    if target.is_multicast:
        return "multicast"
    if isinstance(target, ipaddress.IPv4Address) and target in _SHARED:
        return "shared (CGNAT)"
    if target.is_private and not target.is_reserved and _is_rfc_private(target):
        return "private"
    if not target.is_global:
        return "reserved"
    return None


def _is_rfc_private(address: AnyAddress) -> bool:
    """RFC 1918 and IPv6 unique-local: the ranges people call private networks."""
    if isinstance(address, ipaddress.IPv4Address):
        return any(
            address in ipaddress.ip_network(n)
            for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
        )
    return address in ipaddress.ip_network("fc00::/7")


@dataclass(frozen=True)
class Destination:
    """Where a POST goes: the checked ``address`` and the URL's own parts."""

    parts: SplitResult
    host: str
    port: int
    address: str

    def pinned_url(self) -> str:
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return self.parts._replace(netloc=f"{literal}:{self.port}").geturl()

    @property
    def host_header(self) -> str:
        default = 443 if self.parts.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def destination_check(url: str) -> Destination:
    """Resolve ``url``'s host and check every address it resolves to.

    Returns the destination pinned to the first address (all of them passed: a name
    that answers one public and one internal address is refused, since the
    connection could be steered to either). A host on ``TRINITY_WEBHOOK_ALLOW`` by
    name passes whatever it resolves to. Raises DestinationRefused.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    allow: tuple[str, ...] = tuple(settings.TRINITY_WEBHOOK_ALLOW)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise DestinationRefused(f"the host {host!r} does not resolve") from None
    addresses = list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))
    if not addresses:
        raise DestinationRefused(f"the host {host!r} does not resolve")
    if host not in allow:
        for address in addresses:
            reason = address_refusal(address, allow=allow)
            if reason is not None:
                raise DestinationRefused(
                    f"the host {host!r} resolves to {address}, a {reason} address; "
                    "webhooks reach public addresses only unless the admin lists it "
                    "in TRINITY_WEBHOOK_ALLOW"
                )
    return Destination(parts=parts, host=host, port=port, address=addresses[0])


def destination_vet(url: str) -> None:
    """The save-time check: ``destination_check``, except that a host the admin
    lists by name needs no answer from DNS yet (it is checked, and pinned, on each
    delivery). Raises DestinationRefused."""
    if (urlsplit(url).hostname or "").lower() in settings.TRINITY_WEBHOOK_ALLOW:
        return
    destination_check(url)


def post(*, url: Secret, payload: dict[str, Any]) -> PostResult:
    """POST ``payload`` as JSON to ``url``. Never raises for the receiver's fault.

    The destination is checked again first (its DNS may have changed since the
    channel was saved); a refused one is a permanent failure, nothing is sent. The
    receiver's body is never read into the result: a "receiver" that is really an
    internal service would otherwise answer the admin's screen with its contents.
    """
    try:
        destination = destination_check(url.reveal())
    except DestinationRefused as exc:
        return PostResult(delivered=False, error=f"Not sent: {exc}.", permanent=True)
    extensions = {"sni_hostname": destination.host} if destination.parts.scheme == "https" else {}
    try:
        response = _http.get().post(
            destination.pinned_url(),
            json=payload,
            headers={"Host": destination.host_header},
            extensions=extensions,
        )
    except httpx.HTTPError as exc:
        # httpx's messages name the failure, not the URL; redact anyway (a proxy or
        # resolver message may quote the host and path).
        error = redact(f"{type(exc).__name__}: {exc}")[:ERROR_LENGTH]
        return PostResult(delivered=False, error=error)
    code = response.status_code
    if 200 <= code < 300:
        return PostResult(delivered=True, status_code=code)
    return PostResult(
        delivered=False,
        status_code=code,
        error=f"HTTP {code}",
        retry_after=_retry_after(response) if code in (429, 503) else None,
        permanent=400 <= code < 500 and code not in RETRYABLE_4XX,
    )


def slack_payload(
    *, level: str, title: str, body: str, agent_name: str, agent_owner: str | None = None
) -> dict[str, Any]:
    """Slack's incoming-webhook shape (Mattermost and Rocket.Chat take it too). The
    agent is named with its owner: names are unique per owner only."""
    marker = {"critical": ":rotating_light:", "warning": ":warning:"}.get(
        level, ":information_source:"
    )
    lines = [f"{marker} *{title}*"]
    if body:
        lines.append(body)
    if agent_name:
        whose = f" ({agent_owner})" if agent_owner else ""
        lines.append(f"_agent: {agent_name}{whose}_")
    return {"text": "\n".join(lines)}
