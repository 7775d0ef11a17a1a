"""A plan's sign-in from the panel, start to finish.

``plan_sign_in_start`` makes the PKCE verifier and the state, keeps them server-side
(the cache, ``FLOW_TTL_SECONDS``, bound to the admin who started the flow: the
verifier never reaches the browser) and returns the provider's authorize URL.
``plan_sign_in_finish`` takes what the admin pasted back (Claude's ``code#state``,
ChatGPT's callback address), checks the state, redeems the code at
the provider's token endpoint and registers the plan with its tokens, encrypted: a
Claude plan's access token as its token with the refresh token and expiry beside it
(``subscriptions/claude_refresh.py``), a ChatGPT plan's whole sign-in as the Codex
credential (``subscriptions/codex_credential.py``). From then on the platform
refreshes it (``subscriptions/plan_refresh.py``). Nothing is stored when any step
fails, and the flow stays open for another paste until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.core.cache import cache
from django.db import transaction

from routing import billing
from subscriptions.claude_refresh import claude_credential_answered, claude_credential_store
from subscriptions.models import Subscription
from subscriptions.plan_refresh import payload_text, register_tokens
from subscriptions.plan_sign_in.providers import (
    CLIENTS,
    ProviderUnavailable,
    SignInProvider,
    authorize_url,
    code_redeem,
)
from subscriptions.services import subscription_register
from trinity.errors import InvalidInput, NotFound

FLOW_TTL_SECONDS = 600
_CACHE_KEY = "plan-sign-in:{}"


@dataclass(frozen=True)
class SignInStarted:
    flow: str
    provider: SignInProvider
    authorize_url: str
    expires_at: datetime


def pkce_pair() -> tuple[str, str]:
    """A fresh code verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pasted_code(text: str) -> tuple[str, str]:
    """``(code, state)`` from what an admin pasted: ``code#state`` (Claude's page), a
    callback address or query with ``code`` and ``state`` (ChatGPT's), or a bare code
    (state "")."""
    text = text.strip()
    if "code=" in text or "://" in text:
        query = urllib.parse.urlsplit(text).query if "?" in text else text
        params = urllib.parse.parse_qs(query)
        return params.get("code", [""])[0].strip(), params.get("state", [""])[0].strip()
    code, _, state = text.partition("#")
    return code.strip(), state.strip()


def plan_type_check(provider: SignInProvider, plan_type: str) -> None:
    """Raises InvalidInput (field ``plan_type``) for a plan type the billing catalog
    does not know for ``provider``'s plans: said before the admin signs in."""
    kind = CLIENTS[provider].provider
    if billing.lookup(kind, plan_type) is None:
        raise InvalidInput(
            "Unknown plan type; choose one of: " + ", ".join(billing.plan_types(kind)),
            field="plan_type",
        )


def pending_flow(key: str, user_id: int) -> dict[str, object]:
    """The sign-in kept under cache ``key``, if it is ``user_id``'s. Raises NotFound
    when it is another admin's, expired or finished."""
    pending = cache.get(key)
    if not isinstance(pending, dict) or pending.get("user") != user_id:
        raise NotFound(
            "No sign-in of yours waits under this id: it expired or was finished. Start again."
        )
    return pending


def plan_sign_in_start(
    *, user_id: int, provider: SignInProvider, name: str, plan_type: str, now: datetime
) -> SignInStarted:
    """Start a sign-in of plan ``name`` for the admin ``user_id``. Raises InvalidInput
    for a plan type the billing catalog does not know (before the admin signs in)."""
    plan_type_check(provider, plan_type)
    verifier, challenge = pkce_pair()
    state, flow = secrets.token_urlsafe(24), secrets.token_urlsafe(18)
    pending = {
        "user": user_id,
        "provider": provider.value,
        "name": name.strip(),
        "plan_type": plan_type,
        "verifier": verifier,
        "state": state,
    }
    cache.set(_CACHE_KEY.format(flow), pending, timeout=FLOW_TTL_SECONDS)
    url = authorize_url(provider, challenge=challenge, state=state)
    return SignInStarted(flow, provider, url, now + timedelta(seconds=FLOW_TTL_SECONDS))


def plan_sign_in_finish(
    *, user_id: int, flow: str, pasted: str, now: datetime, client: httpx.Client | None = None
) -> tuple[Subscription, bool]:
    """Redeem the pasted code of ``flow`` and register its plan; returns ``(plan,
    created)``. Raises NotFound for a flow that is not this admin's or expired,
    InvalidInput (field ``pasted``) for a code of another sign-in or one the provider
    refuses, ProviderUnavailable when the provider cannot say."""
    code, state = pasted_code(pasted)
    if not (code and state):
        # Both pages give the state with the code: it is what ties the code to this flow.
        raise InvalidInput(
            "Paste all the provider's page showed: Claude's code#state, or the whole "
            "callback address ChatGPT's sign-in landed on.",
            field="pasted",
        )
    key = _CACHE_KEY.format(flow)
    pending = pending_flow(key, user_id)
    if not hmac.compare_digest(state.encode(), str(pending["state"]).encode()):
        raise InvalidInput(
            "This code belongs to another sign-in (its state does not match). Start again.",
            field="pasted",
        )
    provider = SignInProvider(str(pending["provider"]))
    answer = code_redeem(
        provider,
        code=code,
        verifier=str(pending["verifier"]),
        state=str(pending["state"]),
        client=client,
    )
    registered = plan_store(
        provider, answer, name=str(pending["name"]), plan_type=str(pending["plan_type"]), now=now
    )
    cache.delete(key)
    return registered


@transaction.atomic
def plan_store(
    provider: SignInProvider, answer: dict[str, object], *, name: str, plan_type: str, now: datetime
) -> tuple[Subscription, bool]:
    """Register (or, for an existing name, sign in again) the plan with the tokens the
    provider answered; both ways of signing in end here. Raises ProviderUnavailable
    for tokens the platform cannot use (nothing is stored)."""
    client = CLIENTS[provider]
    try:
        if provider is SignInProvider.CLAUDE:
            credential = claude_credential_answered(answer, now=now)
            if credential is None or not credential.refresh_token:
                raise InvalidInput("no access or refresh token", field="token")
            subscription, created = subscription_register(
                name=name,
                provider=client.provider,
                plan_type=plan_type,
                token=credential.access_token,
            )
            changed = claude_credential_store(subscription, credential)
            subscription.save(update_fields=[*changed, "updated_at"])
            return subscription, created
        tokens = {k: payload_text(answer, k) for k in ("id_token", "access_token", "refresh_token")}
        register_tokens(*tokens.values())
        return subscription_register(
            name=name,
            provider=client.provider,
            plan_type=plan_type,
            token=json.dumps({"tokens": tokens}),
        )
    except InvalidInput as exc:
        if exc.field != "token":
            raise
        # The tokens are the provider's: what is wrong with them is not the admin's input.
        raise ProviderUnavailable(
            f"The {provider} sign-in answered tokens the platform cannot use: {exc.message}"
        ) from None
