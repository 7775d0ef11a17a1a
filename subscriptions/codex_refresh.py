"""A Codex plan's tokens: refreshed by the platform, once, through the one lock-and-rotate
core (``subscriptions/plan_refresh.py``; its docstring says why and how).

What is Codex's own: the stored credential is the parsed auth.json in the token field
(``subscriptions/codex_credential.py``), its expiry is the access token's JWT ``exp``,
the refresh is the Codex CLI's (its client id, JSON body, ``POST
{TRINITY_CODEX_AUTH_URL}/oauth/token``), and a rotation carries a new id token too.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

import httpx
from django.conf import settings

from routing.rung import Rung, RungKind
from routing.secret import SecretValue
from subscriptions.codex_credential import CodexCredential, codex_credential_load
from subscriptions.models import Provider, Subscription
from subscriptions.plan_refresh import (
    REFRESH_AHEAD,
    Fresh,
    Refresh,
    RefreshScheme,
    payload_text,
    plan_credential_fresh,
    refresh_due,
    register_tokens,
)
from trinity.crypto import Secret, fingerprint

logger = logging.getLogger(__name__)

__all__ = ["REFRESH_AHEAD", "Fresh", "Refresh", "refresh_due"]

REFRESH_PATH = "/oauth/token"
# The Codex CLI's public OAuth client (the sign-in the tokens came from).
CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
SCOPE = "openid profile email"
SIGN_IN_DEAD_NOTICE = "codex_sign_in_dead"


def codex_tokens(secret: SecretValue) -> CodexCredential:
    """The stored credential, every token of it registered with redaction (a refresh
    token has no shape the redaction patterns would know)."""
    credential = codex_credential_load(secret.reveal())
    register_tokens(credential.access_token, credential.refresh_token, credential.id_token)
    return credential


def _load(row: Subscription) -> CodexCredential:
    return codex_tokens(row.token)


def _store(row: Subscription, credential: CodexCredential) -> list[str]:
    row.token = Secret(credential.dumps())
    row.token_fingerprint = fingerprint(credential.access_token)
    return ["token", "token_fingerprint"]


def _request(credential: CodexCredential) -> tuple[str, dict[str, str]]:
    body = {
        "client_id": CLIENT_ID,
        "grant_type": "refresh_token",
        "refresh_token": credential.refresh_token,
        "scope": SCOPE,
    }
    return settings.TRINITY_CODEX_AUTH_URL + REFRESH_PATH, body


def _rotated(
    credential: CodexCredential, payload: dict[str, Any], now: datetime
) -> CodexCredential | None:
    access = payload_text(payload, "access_token")
    if not access:
        return None
    rotated = credential.rotated(
        access_token=access,
        refresh_token=payload_text(payload, "refresh_token"),
        id_token=payload_text(payload, "id_token"),
    )
    register_tokens(rotated.access_token, rotated.refresh_token, rotated.id_token)
    return rotated


def _notice(name: str, code: str) -> tuple[str, str, str]:
    return (
        SIGN_IN_DEAD_NOTICE,
        f"Codex plan {name!r} must be signed in again",
        f"Its refresh was refused ({code}): the sign-in can no longer be renewed, so its "
        "turns walk to other plans until then. Sign in with ChatGPT again (Subscriptions, "
        "Add subscription, same name), or run `codex login` and paste the new auth.json "
        "as the plan's token.",
    )


CODEX_SCHEME: RefreshScheme[CodexCredential] = RefreshScheme(
    provider="codex",
    columns=("token",),
    load=_load,
    store=_store,
    request=_request,
    rotated=_rotated,
    notice=_notice,
)


def codex_credential_fresh(
    subscription_id: int,
    *,
    now: datetime,
    held: CodexCredential | None = None,
    client: httpx.Client | None = None,
) -> Fresh[CodexCredential]:
    """``plan_credential_fresh`` of a Codex plan. Raises ``Subscription.DoesNotExist``
    for a deleted plan."""
    return plan_credential_fresh(CODEX_SCHEME, subscription_id, now=now, held=held, client=client)


def codex_fresh_secret(
    subscription: Subscription, *, now: datetime, client: httpx.Client | None = None
) -> Secret:
    """``codex_credential_fresh`` of the plan in hand, in the stored form, for a caller
    that passes the credential on as a ``Secret`` (the usage collector)."""
    held = codex_tokens(subscription.token)
    fresh = codex_credential_fresh(subscription.pk, now=now, held=held, client=client)
    return Secret(fresh.credential.dumps())


def codex_wire_rung(rung: Rung, *, now: datetime) -> Rung:
    """``rung`` as a turn sends it: a Codex plan's rung carries the plan's current
    access token and its account, refreshed first when due; never its refresh token.
    Any other rung is sent as it is. A plan whose refresh failed is sent its current
    tokens: the provider's refusal walks the turn."""
    if rung.provider != Provider.OPENAI_CODEX or rung.kind is not RungKind.SUBSCRIPTION:
        return rung
    assert rung.subscription_id is not None  # noqa: S101 - a plan's rung names its plan
    if rung.account_id:  # already its wire form: the turn sends on this plan again
        held = CodexCredential(rung.secret.reveal(), "", rung.account_id)
    else:  # the stored credential the turn read with the plan's rung
        held = codex_tokens(rung.secret)
    # The turn read the tokens moments ago: only a token about to expire costs a read
    # of the row (and, when it is still due there, the refresh).
    sent = codex_credential_fresh(rung.subscription_id, now=now, held=held).credential
    return replace(rung, secret=Secret(sent.access_token), account_id=sent.account_id)
