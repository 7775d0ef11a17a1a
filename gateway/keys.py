"""Gateway keys: issued once, kept as digests, changed and revoked by services.

A key is ``trinity-gw-`` and 32 random bytes (URL-safe). The database keeps its
SHA-256 (``digest``) and the first characters after the prefix (``prefix``, to tell
keys apart in a list); the key itself exists only in the ``IssuedGatewayKey`` a
create returns. Every write moves ``updated_at``: the gateway process polls it, so a
revocation ends that key's open streams within a poll.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from gateway.catalog import FAMILIES
from gateway.models import PROVIDERS, GatewayKey
from trinity.errors import Conflict, InvalidInput

KEY_PREFIX: Final = "trinity-gw-"
SHOWN_CHARS: Final = 6
# The limits a key may carry (each None: off).
LIMIT_FIELDS: Final = (
    "requests_per_minute",
    "max_streams",
    "daily_tokens",
    "monthly_tokens",
    "daily_usd",
    "monthly_usd",
)
USD_PLACES: Final = Decimal("0.0001")
CHANGEABLE: Final = ("name", "expires_at", "providers", "model_families", *LIMIT_FIELDS)


def key_digest(key: str) -> str:
    """The stored form of a presented key (hex SHA-256)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class IssuedGatewayKey:
    """A key just created: its row and the key, which exists only here (show it once)."""

    row: GatewayKey
    key: str = field(repr=False)


def _checked(values: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """``values`` validated (each bad one a clear InvalidInput naming its field)."""
    providers = values.get("providers")
    if providers is not None:
        unknown = sorted(set(providers) - set(PROVIDERS))
        if unknown:
            raise InvalidInput(
                f"Unknown provider(s) {unknown}; choose from {list(PROVIDERS)}.", field="providers"
            )
    families = values.get("model_families")
    if families is not None:
        known = {family for names in FAMILIES.values() for family in names}
        unknown = sorted(set(families) - known)
        if unknown:
            raise InvalidInput(
                f"Unknown model famil(y/ies) {unknown}; choose from {sorted(known)}.",
                field="model_families",
            )
    expires_at = values.get("expires_at")
    if expires_at is not None and expires_at <= now:
        raise InvalidInput("The expiry must be in the future.", field="expires_at")
    for name in LIMIT_FIELDS:
        limit = values.get(name)
        if limit is not None and Decimal(limit) <= 0:
            raise InvalidInput(f"{name} must be positive (or null: no limit).", field=name)
        if limit is not None and Decimal(limit) != Decimal(limit).quantize(USD_PLACES):
            # The column keeps four places: a finer cap would be stored as another one.
            raise InvalidInput(f"{name} takes at most 4 decimal places.", field=name)
    label = values.get("name")
    if label is not None and not str(label).strip():
        raise InvalidInput("A key needs a name.", field="name")
    return values


@transaction.atomic
def gateway_key_create(
    *,
    owner: User,
    created_by: User,
    name: str,
    now: datetime,
    **values: Any,
) -> IssuedGatewayKey:
    """Create a key for ``owner`` (``values``: any of ``CHANGEABLE`` but the name).

    Raises InvalidInput for a bad value, Conflict when the owner has a key of that name.
    """
    unknown = set(values) - set(CHANGEABLE)
    if unknown:
        raise InvalidInput(f"Unknown field(s) {sorted(unknown)}.")
    _checked({**values, "name": name}, now=now)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = GatewayKey(
        owner=owner,
        created_by=created_by,
        name=name.strip(),
        prefix=key[len(KEY_PREFIX) : len(KEY_PREFIX) + SHOWN_CHARS],
        digest=key_digest(key),
        created_at=now,
        updated_at=now,
        **values,
    )
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError as exc:
        raise Conflict(f"A gateway key named {name!r} exists already.", field="name") from exc
    return IssuedGatewayKey(row=row, key=key)


@transaction.atomic
def gateway_key_update(*, key: GatewayKey, now: datetime, **values: Any) -> GatewayKey:
    """Change a key's name, expiry, allowed providers/families or limits. A revoked key
    cannot change. Raises InvalidInput / Conflict as ``gateway_key_create``."""
    unknown = set(values) - set(CHANGEABLE)
    if unknown:
        raise InvalidInput(f"Unknown field(s) {sorted(unknown)}.")
    if key.revoked_at is not None:
        raise Conflict("This key is revoked; create a new one.")
    _checked(values, now=now)
    for name, value in values.items():
        setattr(key, name, value.strip() if name == "name" else value)
    key.updated_at = now
    try:
        with transaction.atomic():
            key.save(update_fields=[*values, "updated_at"])
    except IntegrityError as exc:
        raise Conflict("A gateway key of that name exists already.", field="name") from exc
    return key


def gateway_key_revoke(*, key: GatewayKey, now: datetime) -> GatewayKey:
    """Revoke ``key`` (idempotent): it is refused from now on, and the gateway ends its
    open streams when it next polls (within ``TRINITY_GATEWAY_POLL_SECONDS``)."""
    GatewayKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
        revoked_at=now, updated_at=now
    )
    key.refresh_from_db(fields=["revoked_at", "updated_at"])
    return key
