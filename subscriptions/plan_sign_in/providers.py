"""Each provider's side of a plan's sign-in: the authorize URL the admin opens, and the
one call that redeems a pasted code at the provider's token endpoint.

The flows are the CLIs' own: Claude Code's manual flow (its public client, the
console's callback page that shows ``code#state``, a JSON token request with the
verifier and state) and the Codex CLI's ChatGPT sign-in (its public client, the
localhost callback the admin copies from the address bar, a form-encoded token
request). ChatGPT also offers the Codex CLI's device-code sign-in (``codex login
--device-auth``): ``device_code_request`` asks for a user code, ``device_code_poll``
asks whether the person entered it and signed in, and the code it then gives is
redeemed by ``code_redeem`` with the device redirect URI. The URLs are settings
(``TRINITY_CLAUDE_OAUTH_*``, ``TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL``,
``TRINITY_CHATGPT_DEVICE_URL``, ``TRINITY_CODEX_AUTH_URL``); under ``make run`` and
in tests they are the simulator's.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
from django.conf import settings

from subscriptions import claude_refresh, codex_refresh
from subscriptions.models import Provider
from subscriptions.plan_refresh import REFRESH_TIMEOUT, error_code, payload_text
from trinity.errors import DomainError, InvalidInput

logger = logging.getLogger(__name__)


class SignInProvider(StrEnum):
    CLAUDE = "claude"
    CHATGPT = "chatgpt"


# The API's choice of provider (and its schema enum, ``SignInProviderEnum``).
SIGN_IN_CHOICES = tuple(p.value for p in SignInProvider)


class ProviderUnavailable(DomainError):
    """The provider's token endpoint could not be reached, or answered an error that
    is not about the code (a 5xx, an answer of an unknown shape)."""

    status_code = 502
    code = "provider_unavailable"


class SignInEnded(DomainError):
    """A device-code sign-in that can no longer finish: it expired, the person
    cancelled it at the provider, or the provider refused its code. Start again."""

    status_code = 410
    code = "sign_in_ended"


@dataclass(frozen=True)
class Client:
    """One provider's public OAuth client, as its CLI signs in."""

    provider: str  # the Subscription's provider
    client_id: str
    redirect_uri: str
    scope: str
    extra: tuple[tuple[str, str], ...] = ()


CLIENTS = {
    SignInProvider.CLAUDE: Client(
        Provider.ANTHROPIC,
        claude_refresh.CLIENT_ID,
        "https://console.anthropic.com/oauth/code/callback",
        "org:create_api_key user:profile user:inference",
        (("code", "true"),),
    ),
    SignInProvider.CHATGPT: Client(
        Provider.OPENAI_CODEX,
        codex_refresh.CLIENT_ID,
        "http://localhost:1455/auth/callback",
        "openid profile email offline_access",
        (("id_token_add_organizations", "true"), ("codex_cli_simplified_flow", "true")),
    ),
}


def authorize_url(key: SignInProvider, *, challenge: str, state: str) -> str:
    """The provider's authorize page for this sign-in (the S256 ``challenge`` of the
    verifier the platform keeps)."""
    client = CLIENTS[key]
    base = (
        settings.TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL
        if key is SignInProvider.CLAUDE
        else settings.TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL
    )
    params = [
        *client.extra,
        ("client_id", client.client_id),
        ("response_type", "code"),
        ("redirect_uri", client.redirect_uri),
        ("scope", client.scope),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", state),
    ]
    return f"{base}?{urllib.parse.urlencode(params)}"


def code_redeem(
    key: SignInProvider,
    *,
    code: str,
    verifier: str,
    state: str,
    redirect_uri: str | None = None,
    client: httpx.Client | None = None,
) -> dict[str, Any]:
    """The token endpoint's answer for ``code`` (access, refresh and, for ChatGPT, id
    tokens), asked with the client's redirect URI unless ``redirect_uri`` says another
    (a device code's). Raises InvalidInput (field ``pasted``) when the provider refuses
    the code, ProviderUnavailable when it cannot say."""
    oauth = CLIENTS[key]
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri or oauth.redirect_uri,
        "client_id": oauth.client_id,
        "code_verifier": verifier,
    }
    try:
        if key is SignInProvider.CLAUDE:
            body["state"] = state
            response = _post(settings.TRINITY_CLAUDE_OAUTH_TOKEN_URL, client, json=body)
        else:
            url = settings.TRINITY_CODEX_AUTH_URL + codex_refresh.REFRESH_PATH
            response = _post(url, client, data=body)
    except httpx.HTTPError as exc:
        logger.warning("%s sign-in: token endpoint unreachable: %s", key, type(exc).__name__)
        raise ProviderUnavailable(f"The {key} sign-in service did not answer; try again.") from None
    return _answer(key, response)


def _post(url: str, client: httpx.Client | None, **body: Any) -> httpx.Response:
    if client is None:
        with httpx.Client(timeout=REFRESH_TIMEOUT) as own:
            return own.post(url, **body)
    return client.post(url, timeout=REFRESH_TIMEOUT, **body)


def _answer(key: SignInProvider, response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code == 200 and isinstance(payload, dict):
        return payload
    code = error_code(payload)
    logger.warning("%s sign-in: code refused: HTTP %s %s", key, response.status_code, code)
    if 400 <= response.status_code < 500:
        raise InvalidInput(
            "The provider refused the code: it expired, was used already, or belongs to "
            f"another sign-in ({code or response.status_code}). Start the sign-in again.",
            field="pasted",
        )
    raise ProviderUnavailable(
        f"The {key} sign-in service answered HTTP {response.status_code}; try again."
    )


# ChatGPT's device-code sign-in

DEVICE_USERCODE_PATH = "/api/accounts/deviceauth/usercode"
DEVICE_POLL_PATH = "/api/accounts/deviceauth/token"
DEVICE_REDIRECT_PATH = "/deviceauth/callback"
DEFAULT_POLL_INTERVAL = 5


@dataclass(frozen=True)
class DeviceCode:
    """What the provider answers a device-code request: its id (kept on the server),
    the user code the person types, and how often to ask."""

    device_auth_id: str
    user_code: str
    interval: int


def device_redirect_uri() -> str:
    """The redirect URI a device code is redeemed with (the Codex CLI's)."""
    return settings.TRINITY_CODEX_AUTH_URL + DEVICE_REDIRECT_PATH


def poll_interval(value: object) -> int:
    # The provider sends the interval as a string or a number; a poll more often
    # than every second, or rarer than a minute, is not what it meant.
    try:
        seconds = int(str(value).strip())
    except ValueError:
        return DEFAULT_POLL_INTERVAL
    return min(max(seconds, 1), 60)


def device_code_request(client: httpx.Client | None = None) -> DeviceCode:
    """A new device code for the Codex client. Raises ProviderUnavailable when the
    provider does not answer one."""
    url = settings.TRINITY_CODEX_AUTH_URL + DEVICE_USERCODE_PATH
    try:
        response = _post(url, client, json={"client_id": codex_refresh.CLIENT_ID})
        payload = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        logger.warning("device sign-in: user code request failed: %s", type(exc).__name__)
        payload = None
    if not isinstance(payload, dict):
        payload = {}
    device_auth_id = payload_text(payload, "device_auth_id")
    user_code = payload_text(payload, "user_code")
    if not (device_auth_id and user_code):
        raise ProviderUnavailable("The chatgpt sign-in service gave no device code; try again.")
    return DeviceCode(device_auth_id, user_code, poll_interval(payload.get("interval")))


def device_code_poll(
    *, device_auth_id: str, user_code: str, client: httpx.Client | None = None
) -> tuple[str, str] | None:
    """``(authorization code, verifier)`` once the person signed in, None while they
    have not (the provider's 403 or 404). Raises SignInEnded when the provider ended
    the sign-in (another 4xx), ProviderUnavailable when it cannot say."""
    url = settings.TRINITY_CODEX_AUTH_URL + DEVICE_POLL_PATH
    body = {"device_auth_id": device_auth_id, "user_code": user_code}
    try:
        response = _post(url, client, json=body)
    except httpx.HTTPError as exc:
        logger.warning("device sign-in: poll unreachable: %s", type(exc).__name__)
        raise ProviderUnavailable(
            "The chatgpt sign-in service did not answer; try again."
        ) from None
    if response.status_code in (403, 404):
        return None
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code == 200 and isinstance(payload, dict):
        code = payload_text(payload, "authorization_code")
        verifier = payload_text(payload, "code_verifier")
        if code and verifier:
            return code, verifier
    reason = error_code(payload) or str(response.status_code)
    logger.warning("device sign-in: poll answered HTTP %s %s", response.status_code, reason)
    if 400 <= response.status_code < 500:
        raise SignInEnded(f"The provider ended this sign-in ({reason}). Start again.")
    raise ProviderUnavailable(
        f"The chatgpt sign-in service answered HTTP {response.status_code}; try again."
    )
