"""A ChatGPT plan signed in with a device code, as ``codex login --device-auth`` does
when no browser can reach the machine: nothing is pasted back.

``plan_device_sign_in_start`` asks the provider for a user code and keeps its device
auth id server-side (the cache, ``DEVICE_TTL_SECONDS``, bound to the admin who
started: the id never reaches the browser); the admin types the user code on the
provider's device page (``TRINITY_CHATGPT_DEVICE_URL``) and signs in there.
``plan_device_sign_in_poll`` asks the provider once per call; once the admin signed
in, it redeems the authorization code the provider gave with its verifier and
registers the plan through the pasted flow's ``plan_store``. Nothing is stored when
any step fails.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.core.cache import cache

from subscriptions.models import Subscription
from subscriptions.plan_sign_in.flow import pending_flow, plan_store, plan_type_check
from subscriptions.plan_sign_in.providers import (
    SignInEnded,
    SignInProvider,
    code_redeem,
    device_code_poll,
    device_code_request,
    device_redirect_uri,
)
from trinity.errors import InvalidInput

# The provider's device codes live about 15 minutes.
DEVICE_TTL_SECONDS = 15 * 60
_CACHE_KEY = "plan-sign-in-device:{}"
# Held while one poll redeems the code: a second poll racing it reads as pending
# instead of spending the single-use code again.
_REDEEMING_KEY = "plan-sign-in-device:{}:redeeming"
_REDEEMING_TTL_SECONDS = 60


@dataclass(frozen=True)
class DeviceSignInStarted:
    flow: str
    user_code: str
    verification_url: str
    interval: int
    expires_at: datetime


def plan_device_sign_in_start(
    *, user_id: int, name: str, plan_type: str, now: datetime, client: httpx.Client | None = None
) -> DeviceSignInStarted:
    """Start a device-code sign-in of ChatGPT plan ``name`` for the admin ``user_id``.
    Raises InvalidInput for an unknown plan type (before the provider is asked),
    ProviderUnavailable when the provider gives no user code."""
    plan_type_check(SignInProvider.CHATGPT, plan_type)
    device = device_code_request(client)
    flow = secrets.token_urlsafe(18)
    expires_at = now + timedelta(seconds=DEVICE_TTL_SECONDS)
    pending = {
        "user": user_id,
        "name": name.strip(),
        "plan_type": plan_type,
        "device_auth_id": device.device_auth_id,
        "user_code": device.user_code,
        "expires_at": expires_at.isoformat(),
    }
    cache.set(_CACHE_KEY.format(flow), pending, timeout=DEVICE_TTL_SECONDS)
    return DeviceSignInStarted(
        flow, device.user_code, settings.TRINITY_CHATGPT_DEVICE_URL, device.interval, expires_at
    )


def plan_device_sign_in_poll(
    *, user_id: int, flow: str, now: datetime, client: httpx.Client | None = None
) -> tuple[Subscription, bool] | None:
    """Ask the provider once whether the admin signed ``flow`` in; None while not,
    else the registered plan and whether it was created. Raises NotFound for a flow
    that is not this admin's or is gone, SignInEnded when it expired or the provider
    ended it (the flow is dropped), ProviderUnavailable when the provider cannot say
    (the flow stays)."""
    key = _CACHE_KEY.format(flow)
    pending = pending_flow(key, user_id)
    if now >= datetime.fromisoformat(str(pending["expires_at"])):
        cache.delete(key)
        raise SignInEnded("The device code expired before the sign-in. Start again.")
    try:
        found = device_code_poll(
            device_auth_id=str(pending["device_auth_id"]),
            user_code=str(pending["user_code"]),
            client=client,
        )
    except SignInEnded:
        cache.delete(key)
        raise
    if found is None or not cache.add(_REDEEMING_KEY.format(flow), 1, _REDEEMING_TTL_SECONDS):
        return None
    try:
        registered = _redeemed(pending, *found, now=now, client=client)
    except SignInEnded:
        cache.delete(key)
        raise
    finally:
        cache.delete(_REDEEMING_KEY.format(flow))
    cache.delete(key)
    return registered


def _redeemed(
    pending: dict[str, object],
    code: str,
    verifier: str,
    *,
    now: datetime,
    client: httpx.Client | None,
) -> tuple[Subscription, bool]:
    chatgpt = SignInProvider.CHATGPT
    try:
        answer = code_redeem(
            chatgpt,
            code=code,
            verifier=verifier,
            state="",
            redirect_uri=device_redirect_uri(),
            client=client,
        )
    except InvalidInput as exc:
        # A code the provider gave and then refuses: this sign-in cannot finish.
        raise SignInEnded(exc.message) from None
    return plan_store(
        chatgpt, answer, name=str(pending["name"]), plan_type=str(pending["plan_type"]), now=now
    )
