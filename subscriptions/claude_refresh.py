"""A Claude plan's sign-in tokens: refreshed by the platform before its access token
expires, once, through the one lock-and-rotate core (``subscriptions/plan_refresh.py``).

A Claude plan signed in from the panel keeps its access token where a pasted plan
token lives (``Subscription.token``: every reader of a Claude plan's token, the
boot environment, the usage probe and the gateway, reads it as before), its refresh
token encrypted beside it (``refresh_token``) and the access token's expiry in
``token_expires_at``, the answer's ``expires_in`` from the moment it was issued. A
pasted token has neither and is never refreshed.

The refresh is Claude Code's own: ``POST {TRINITY_CLAUDE_OAUTH_TOKEN_URL}`` with a JSON
body ``{grant_type: refresh_token, refresh_token, client_id}``; the answer carries
``access_token``, ``refresh_token`` and ``expires_in``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings

from routing.rung import Rung, RungKind
from subscriptions.models import Provider, Subscription
from subscriptions.plan_refresh import (
    Fresh,
    RefreshScheme,
    payload_text,
    plan_credential_fresh,
    refresh_due,
    register_tokens,
)
from trinity.crypto import Secret, fingerprint

# Claude Code's public OAuth client: the sign-in the panel starts is the CLI's.
CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
SIGN_IN_DEAD_NOTICE = "claude_sign_in_dead"


@dataclass(frozen=True, slots=True)
class ClaudeCredential:
    """A Claude plan's tokens: ``refresh_token`` and ``expires`` are empty for a
    pasted token."""

    access_token: str = field(repr=False)
    refresh_token: str = field(repr=False)
    expires: datetime | None

    def expires_at(self) -> datetime | None:
        return self.expires


def claude_credential_answered(
    payload: dict[str, Any], *, now: datetime
) -> ClaudeCredential | None:
    """The credential a token endpoint's 200 answer carries at ``now`` (None without an
    access token); every token registered with redaction."""
    access = payload_text(payload, "access_token")
    if not access:
        return None
    expires_in = payload.get("expires_in")
    expires = None
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        expires = now + timedelta(seconds=expires_in)
    credential = ClaudeCredential(access, payload_text(payload, "refresh_token"), expires)
    register_tokens(credential.access_token, credential.refresh_token)
    return credential


def claude_credential_store(row: Subscription, credential: ClaudeCredential) -> list[str]:
    """Set ``credential`` on ``row`` (not saved); returns the columns it changed."""
    row.token = Secret(credential.access_token)
    row.token_fingerprint = fingerprint(credential.access_token)
    row.refresh_token = Secret(credential.refresh_token) if credential.refresh_token else None
    row.token_expires_at = credential.expires
    return ["token", "token_fingerprint", "refresh_token", "token_expires_at"]


def _load(row: Subscription) -> ClaudeCredential:
    access = row.token.reveal() if row.token is not None else ""
    refresh = row.refresh_token.reveal() if row.refresh_token is not None else ""
    register_tokens(access, refresh)
    return ClaudeCredential(access, refresh, row.token_expires_at)


def _request(credential: ClaudeCredential) -> tuple[str, dict[str, str]]:
    body = {
        "grant_type": "refresh_token",
        "refresh_token": credential.refresh_token,
        "client_id": CLIENT_ID,
    }
    return settings.TRINITY_CLAUDE_OAUTH_TOKEN_URL, body


def _rotated(
    credential: ClaudeCredential, payload: dict[str, Any], now: datetime
) -> ClaudeCredential | None:
    rotated = claude_credential_answered(payload, now=now)
    if rotated is None:
        return None
    # An answer without a new refresh token keeps the old one.
    return replace(rotated, refresh_token=rotated.refresh_token or credential.refresh_token)


def _notice(name: str, code: str) -> tuple[str, str, str]:
    return (
        SIGN_IN_DEAD_NOTICE,
        f"Claude plan {name!r} must be signed in again",
        f"Its refresh was refused ({code}): the sign-in can no longer be renewed, so its "
        "turns walk to other plans until then. Sign in with Claude again (Subscriptions, "
        "Add subscription, same name).",
    )


CLAUDE_SCHEME: RefreshScheme[ClaudeCredential] = RefreshScheme(
    provider="claude",
    columns=("token", "refresh_token", "token_expires_at"),
    load=_load,
    store=claude_credential_store,
    request=_request,
    rotated=_rotated,
    notice=_notice,
)


def claude_credential_fresh(
    subscription_id: int,
    *,
    now: datetime,
    held: ClaudeCredential | None = None,
    client: httpx.Client | None = None,
) -> Fresh[ClaudeCredential]:
    """``plan_credential_fresh`` of a Claude plan. Raises ``Subscription.DoesNotExist``
    for a deleted plan."""
    return plan_credential_fresh(CLAUDE_SCHEME, subscription_id, now=now, held=held, client=client)


def claude_wire_rung(rung: Rung, *, now: datetime) -> Rung:
    """``rung`` as a turn sends it: a signed-in Claude plan's rung carries its current
    access token, refreshed first when it expires within the refresh-ahead window.
    The expiry travels with the rung (read with its token), so a token that holds
    costs nothing. Any other rung is sent as it is; a plan whose refresh failed is
    sent its current token: the provider's refusal walks the turn."""
    if (
        rung.provider != Provider.ANTHROPIC
        or rung.kind is not RungKind.SUBSCRIPTION
        or rung.expires_at is None
    ):
        return rung
    held = ClaudeCredential(rung.secret.reveal(), "", rung.expires_at)
    if not refresh_due(held, now=now):
        return rung
    assert rung.subscription_id is not None  # noqa: S101 - a plan's rung names its plan
    sent = claude_credential_fresh(rung.subscription_id, now=now).credential
    return replace(rung, secret=Secret(sent.access_token), expires_at=sent.expires)


def claude_fresh_secret(
    subscription: Subscription, *, now: datetime, client: httpx.Client | None = None
) -> Secret | None:
    """A signed-in Claude plan's access token, refreshed first when due, for the usage
    probe; None for a plan that is not signed in (its token is read as it is)."""
    if subscription.token_expires_at is None or subscription.token is None:
        return None
    held = ClaudeCredential(subscription.token.reveal(), "", subscription.token_expires_at)
    fresh = claude_credential_fresh(subscription.pk, now=now, held=held, client=client)
    return Secret(fresh.credential.access_token)
