"""The one owner of a signed-in plan's tokens: the platform refreshes them, nobody else.

A sign-in's refresh token (ChatGPT's and Claude's alike) rotates and is single-use:
refreshing returns a new access token *and* a new refresh token, and presenting a used
refresh token again fails, after which the provider may revoke the sign-in. So two
processes that both find the access token expiring must not both refresh.

``plan_credential_fresh`` takes the subscription row's lock (``SELECT ... FOR
UPDATE``, held across processes by PostgreSQL), reads the stored credential *again
inside the lock*, and refreshes only if it is still due; the loser of a race waits
for the lock, re-reads the rotated tokens and returns them without a refresh. The
refresh call is made while holding the lock (bounded by ``REFRESH_TIMEOUT``), and the
rotation is stored before the lock is released, so no other turn can start one on
the same tokens meanwhile. Agents never refresh: they run on what each turn carries.

A refresh the provider refuses (reused, invalidated or expired refresh token) means
the sign-in is dead: the stored tokens stay as they were, the caller gets
``Refresh.SIGN_IN_DEAD`` and the plan answers as a refused credential until an
operator signs in again; the operator is told once. A refresh that fails in transit
changes nothing; the caller goes on with the tokens it has.

What differs by provider (where the tokens live in the row, the refresh request, the
answer's shape, the notice's words) is a ``RefreshScheme``:
``subscriptions/codex_refresh.py`` and ``subscriptions/claude_refresh.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

import httpx
from django.db import transaction

from subscriptions.models import Subscription
from trinity.crypto import Secret
from trinity.models import Notification
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

# Refresh when the access token expires within this long: a turn sent on it must not
# meet its expiry mid-way.
REFRESH_AHEAD = timedelta(minutes=10)
REFRESH_TIMEOUT = httpx.Timeout(10.0)
# What the providers answer for a refresh token that can never work again.
DEAD_CODES = frozenset(
    {"refresh_token_reused", "refresh_token_invalidated", "refresh_token_expired", "invalid_grant"}
)
SIGN_IN_DEAD_NOTICE_TTL = 24 * 3600


class Refresh(StrEnum):
    NOT_DUE = "not_due"  # the access token holds (or the row was refreshed meanwhile)
    REFRESHED = "refreshed"
    UNREFRESHABLE = "unrefreshable"  # a pasted bare access token: nothing to refresh with
    SIGN_IN_DEAD = "sign_in_dead"
    FAILED = "failed"  # in transit, or an answer of an unknown shape


class PlanTokens(Protocol):
    """A plan's stored sign-in: what the core reads of any provider's credential."""

    @property
    def access_token(self) -> str: ...

    @property
    def refresh_token(self) -> str: ...

    def expires_at(self) -> datetime | None: ...


C = TypeVar("C", bound=PlanTokens)


@dataclass(frozen=True)
class Fresh(Generic[C]):
    """The credential to send, and what getting it took. ``code``: the provider's
    error code when the refresh was refused."""

    credential: C
    refresh: Refresh
    code: str = ""


@dataclass(frozen=True)
class RefreshScheme(Generic[C]):
    """How one provider's plan tokens are read from the row, refreshed and stored.

    ``columns``: the row's columns the tokens live in. ``load``: the credential of a
    row (every token registered with redaction). ``store``: the rotated credential
    set on the row; returns the columns it changed. ``request``: the token endpoint's
    URL and the JSON body refreshing ``credential``. ``rotated``: the credential
    after a 200 answer's payload at ``now`` (None: no access token in it).
    ``notice``: the dead sign-in's notice, ``(kind, title, body)`` for a plan name
    and the refusal's code."""

    provider: str
    columns: tuple[str, ...]
    load: Callable[[Subscription], C]
    store: Callable[[Subscription, C], list[str]]
    request: Callable[[C], tuple[str, dict[str, str]]]
    rotated: Callable[[C, dict[str, Any], datetime], C | None]
    notice: Callable[[str, str], tuple[str, str, str]]


def refresh_due(credential: PlanTokens, *, now: datetime) -> bool:
    expires_at = credential.expires_at()
    return expires_at is not None and expires_at - now <= REFRESH_AHEAD


def register_tokens(*values: str) -> None:
    """Register each token with redaction (a refresh token has no shape the redaction
    patterns would know)."""
    for value in values:
        if value:
            Secret(value)


def plan_credential_fresh(
    scheme: RefreshScheme[C],
    subscription_id: int,
    *,
    now: datetime,
    held: C | None = None,
    client: httpx.Client | None = None,
) -> Fresh[C]:
    """The plan's credential, refreshed first when its access token is about to expire
    (once, across every process: the module's docstring). ``held``: the tokens the
    caller already read with the plan: while they hold, nothing is read; due, the
    stored ones decide. Raises ``Subscription.DoesNotExist`` for a deleted plan."""
    if held is not None and not refresh_due(held, now=now):
        return Fresh(held, Refresh.NOT_DUE)
    credential = scheme.load(Subscription.objects.only(*scheme.columns).get(pk=subscription_id))
    if not refresh_due(credential, now=now):
        return Fresh(credential, Refresh.NOT_DUE)
    if not credential.refresh_token:
        return Fresh(credential, Refresh.UNREFRESHABLE)
    with transaction.atomic():
        row = (
            Subscription.objects.select_for_update()
            .only("name", *scheme.columns)
            .get(pk=subscription_id)
        )
        credential = scheme.load(row)  # again, inside the lock
        if not refresh_due(credential, now=now):
            return Fresh(credential, Refresh.NOT_DUE)
        fresh = _refresh(scheme, credential, label=row.name, now=now, client=client)
        if fresh.refresh is Refresh.REFRESHED:
            # Stored before the lock is released: the next holder reads the rotation.
            row.save(update_fields=[*scheme.store(row, fresh.credential), "updated_at"])
            logger.info("%s tokens refreshed: %s", scheme.provider, row.name)
    if fresh.refresh is Refresh.SIGN_IN_DEAD:
        _tell_sign_in_dead(scheme, subscription_id, row.name, fresh.code, now=now)
    return fresh


def _tell_sign_in_dead(
    scheme: RefreshScheme[C], subscription_id: int, name: str, code: str, *, now: datetime
) -> None:
    """One notice per plan a day: only an operator's new sign-in brings it back."""
    kind, title, body = scheme.notice(name, code)
    notification_send(
        kind=kind,
        level=Notification.Level.CRITICAL,
        title=title,
        body=body,
        subscription_id=subscription_id,
        dedup_key=f"{kind}:{subscription_id}",
        dedup_ttl=SIGN_IN_DEAD_NOTICE_TTL,
        now=now,
    )


def _refresh(
    scheme: RefreshScheme[C],
    credential: C,
    *,
    label: str,
    now: datetime,
    client: httpx.Client | None,
) -> Fresh[C]:
    url, body = scheme.request(credential)
    try:
        if client is None:
            with httpx.Client(timeout=REFRESH_TIMEOUT) as own:
                response = own.post(url, json=body)
        else:
            response = client.post(url, json=body, timeout=REFRESH_TIMEOUT)
    except httpx.HTTPError as exc:
        logger.warning(
            "%s refresh of %s failed in transit: %s", scheme.provider, label, type(exc).__name__
        )
        return Fresh(credential, Refresh.FAILED)
    payload = _json(response)
    if response.status_code == 200 and isinstance(payload, dict):
        rotated = scheme.rotated(credential, payload, now)
        if rotated is None:
            logger.warning("%s refresh of %s answered no access token", scheme.provider, label)
            return Fresh(credential, Refresh.FAILED)
        return Fresh(rotated, Refresh.REFRESHED)
    code = error_code(payload)
    if response.status_code in (400, 401, 403) and code in DEAD_CODES:
        logger.warning("%s sign-in of %s is dead: %s", scheme.provider, label, code)
        return Fresh(credential, Refresh.SIGN_IN_DEAD, code)
    logger.warning(
        "%s refresh of %s refused: HTTP %s %s", scheme.provider, label, response.status_code, code
    )
    return Fresh(credential, Refresh.FAILED, code)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def error_code(payload: Any) -> str:
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


def payload_text(payload: dict[str, Any], name: str) -> str:
    """A string field of a token endpoint's answer, or "" when absent or not a string."""
    value = payload.get(name)
    return value if isinstance(value, str) else ""
