"""The one owner of a Codex plan's tokens: the platform refreshes them, nobody else.

A ChatGPT sign-in's refresh token rotates and is single-use: refreshing returns a new
access token *and* a new refresh token, and presenting a used refresh token again
fails (``refresh_token_reused``), after which the provider may revoke the sign-in.
So two processes that both find the access token expiring must not both refresh.

``codex_credential_fresh`` takes the subscription row's lock (``SELECT ... FOR
UPDATE``, held across processes by PostgreSQL), reads the stored credential *again
inside the lock*, and refreshes only if it is still due; the loser of a race waits
for the lock, re-reads the rotated tokens and returns them without a refresh. The
refresh call is made while holding the lock (bounded by ``REFRESH_TIMEOUT``), so no
other turn can start one on the same tokens meanwhile. Agents never refresh: the
Codex CLI runs against the forwarder with a capability and has no sign-in at all.

A refresh the provider refuses (reused, invalidated or expired refresh token) means
the sign-in is dead: the stored tokens stay as they were, the caller gets
``SignInDead`` and the plan answers as a refused credential until an operator signs
in again. A refresh that fails in transit changes nothing; the caller goes on with
the tokens it has (they may still serve, and a refusal walks the turn).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction

from routing.rung import Rung, RungKind
from routing.secret import SecretValue
from subscriptions.codex_credential import CodexCredential, codex_credential_load
from subscriptions.models import Provider, Subscription
from trinity.crypto import Secret, fingerprint
from trinity.models import Notification
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

REFRESH_PATH = "/oauth/token"
# The Codex CLI's public OAuth client (the sign-in the tokens came from).
CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
SCOPE = "openid profile email"
# Refresh when the access token expires within this long: a turn sent on it must not
# meet its expiry mid-way.
REFRESH_AHEAD = timedelta(minutes=10)
REFRESH_TIMEOUT = httpx.Timeout(10.0)
# What the provider answers for a refresh token that can never work again.
DEAD_CODES = frozenset(
    {"refresh_token_reused", "refresh_token_invalidated", "refresh_token_expired", "invalid_grant"}
)


SIGN_IN_DEAD_NOTICE = "codex_sign_in_dead"
SIGN_IN_DEAD_NOTICE_TTL = 24 * 3600


class Refresh(StrEnum):
    NOT_DUE = "not_due"  # the access token holds (or the row was refreshed meanwhile)
    REFRESHED = "refreshed"
    UNREFRESHABLE = "unrefreshable"  # a pasted bare access token: nothing to refresh with
    SIGN_IN_DEAD = "sign_in_dead"
    FAILED = "failed"  # in transit, or an answer of an unknown shape


@dataclass(frozen=True)
class Fresh:
    """The credential to send, and what getting it took. ``code``: the provider's
    error code when the refresh was refused."""

    credential: CodexCredential
    refresh: Refresh
    code: str = ""


def codex_tokens(secret: SecretValue) -> CodexCredential:
    """The stored credential, every token of it registered with redaction (a refresh
    token has no shape the redaction patterns would know)."""
    credential = codex_credential_load(secret.reveal())
    for value in (credential.access_token, credential.refresh_token, credential.id_token):
        if value:
            Secret(value)  # registers it
    return credential


def refresh_due(credential: CodexCredential, *, now: datetime) -> bool:
    expires_at = credential.expires_at()
    return expires_at is not None and expires_at - now <= REFRESH_AHEAD


def codex_credential_fresh(
    subscription_id: int,
    *,
    now: datetime,
    held: CodexCredential | None = None,
    client: httpx.Client | None = None,
) -> Fresh:
    """The plan's credential, refreshed first when its access token is about to expire
    (once, across every process: the module's docstring). ``held``: the tokens the
    caller already read with the plan: while they hold, nothing is read; due, the
    stored ones decide. Raises ``Subscription.DoesNotExist`` for a deleted plan."""
    if held is not None and not refresh_due(held, now=now):
        return Fresh(held, Refresh.NOT_DUE)
    credential = codex_tokens(Subscription.objects.only("token").get(pk=subscription_id).token)
    if not refresh_due(credential, now=now):
        return Fresh(credential, Refresh.NOT_DUE)
    if not credential.refreshable:
        return Fresh(credential, Refresh.UNREFRESHABLE)
    with transaction.atomic():
        row = Subscription.objects.select_for_update().only("token", "name").get(pk=subscription_id)
        credential = codex_tokens(row.token)  # again, inside the lock
        if not refresh_due(credential, now=now):
            return Fresh(credential, Refresh.NOT_DUE)
        fresh = _refresh(credential, label=row.name, client=client)
        if fresh.refresh is Refresh.REFRESHED:
            _store(row, fresh.credential)
    if fresh.refresh is Refresh.SIGN_IN_DEAD:
        _tell_sign_in_dead(subscription_id, row.name, fresh.code, now=now)
    return fresh


def _tell_sign_in_dead(subscription_id: int, name: str, code: str, *, now: datetime) -> None:
    """One notice per plan a day: only an operator's new sign-in brings it back."""
    notification_send(
        kind=SIGN_IN_DEAD_NOTICE,
        level=Notification.Level.CRITICAL,
        title=f"Codex plan {name!r} must be signed in again",
        body=(
            f"Its refresh was refused ({code}): the sign-in can no longer be renewed, so its "
            "turns walk to other plans until then. Run `codex login` and paste the new "
            "auth.json as the plan's token (Subscriptions, Rotate token)."
        ),
        subscription_id=subscription_id,
        dedup_key=f"codex-sign-in-dead:{subscription_id}",
        dedup_ttl=SIGN_IN_DEAD_NOTICE_TTL,
        now=now,
    )


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


def _store(row: Subscription, credential: CodexCredential) -> None:
    row.token = Secret(credential.dumps())
    row.token_fingerprint = fingerprint(credential.access_token)
    row.save(update_fields=["token", "token_fingerprint", "updated_at"])
    logger.info("codex tokens refreshed: %s (…%s)", row.name, row.token_fingerprint)


def _refresh(credential: CodexCredential, *, label: str, client: httpx.Client | None) -> Fresh:
    body = {
        "client_id": CLIENT_ID,
        "grant_type": "refresh_token",
        "refresh_token": credential.refresh_token,
        "scope": SCOPE,
    }
    url = settings.TRINITY_CODEX_AUTH_URL + REFRESH_PATH
    try:
        if client is None:
            with httpx.Client(timeout=REFRESH_TIMEOUT) as own:
                response = own.post(url, json=body)
        else:
            response = client.post(url, json=body, timeout=REFRESH_TIMEOUT)
    except httpx.HTTPError as exc:
        logger.warning("codex refresh of %s failed in transit: %s", label, type(exc).__name__)
        return Fresh(credential, Refresh.FAILED)
    payload = _json(response)
    if response.status_code == 200:
        return _rotated(credential, payload, label=label)
    code = _error_code(payload)
    if response.status_code in (400, 401, 403) and code in DEAD_CODES:
        logger.warning("codex sign-in of %s is dead: %s", label, code)
        return Fresh(credential, Refresh.SIGN_IN_DEAD, code)
    logger.warning("codex refresh of %s refused: HTTP %s %s", label, response.status_code, code)
    return Fresh(credential, Refresh.FAILED, code)


def _rotated(credential: CodexCredential, payload: Any, *, label: str) -> Fresh:
    access = payload.get("access_token") if isinstance(payload, dict) else None
    if not isinstance(access, str) or not access:
        logger.warning("codex refresh of %s answered without an access token", label)
        return Fresh(credential, Refresh.FAILED)

    def text(name: str) -> str:
        value = payload.get(name)
        return value if isinstance(value, str) else ""

    rotated = credential.rotated(
        access_token=access, refresh_token=text("refresh_token"), id_token=text("id_token")
    )
    codex_tokens(Secret(rotated.dumps()))  # register the new tokens before anything logs
    return Fresh(rotated, Refresh.REFRESHED)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _error_code(payload: Any) -> str:
    """``{"error": {"code": ...}}``, ``{"error": "<code>"}`` or ``{"code": ...}``."""
    if not isinstance(payload, dict):
        return ""
    error = payload.get("error")
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return code if isinstance(code, str) else ""
    if isinstance(error, str):
        return error
    code = payload.get("code")
    return code if isinstance(code, str) else ""
