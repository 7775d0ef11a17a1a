"""Reads of the gateway's keys and usage, scoped to who asks.

An operator sees and addresses only their own keys: another person's key id is, to
them, exactly an id that does not exist (404), so ids cannot be probed. An admin sees
every key. The usage read model (``gateway_usage_summary``) groups the usage rows in
the database, per key and model and per key and credential, and folds those groups
(never the rows) into figures per key, per person and overall.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Q, QuerySet, Sum

from gateway.models import GatewayKey, GatewayUsage
from trinity.errors import NotFound

ACTIVE: Final = "active"
EXPIRED: Final = "expired"
REVOKED: Final = "revoked"
KEY_STATUSES: Final = (ACTIVE, EXPIRED, REVOKED)
# The figures each group of usage rows sums to.
TOKEN_FIGURES: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
USD_FIGURES: Final = ("list_usd", "billed_usd")
FIGURES: Final = ("requests", "refused", "disconnected", *TOKEN_FIGURES, *USD_FIGURES)
# A request the gateway answered with an error (every credential refused, an upstream
# failure, its key revoked meanwhile) was refused: it served nothing. A client that left
# before its answer (499) was not refused; it counts as disconnected. A limit's refusal
# comes before any request is made and leaves no row (the gateway's metrics count it).
REFUSED: Final = Q(status__gte=400, disconnected=False)


def _is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(getattr(user, "is_staff", False))


def gateway_keys_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[GatewayKey]:
    """Every key for an admin, the user's own for anyone else (owners joined)."""
    queryset = GatewayKey.objects.select_related("owner", "created_by")
    if _is_admin(user):
        return queryset
    return queryset.filter(owner_id=user.pk)


def gateway_keys_listed(
    *, user: AbstractBaseUser | AnonymousUser, owner: str | None = None
) -> QuerySet[GatewayKey]:
    """The keys a list shows ``user``, newest first; ``owner`` (a username) narrows it
    to that person's (for an operator naming anyone else: none)."""
    queryset = gateway_keys_visible_to(user)
    if owner is not None:
        queryset = queryset.filter(owner__username=owner)
    return queryset.order_by("-created_at", "-id")


def gateway_key_get_visible(*, user: AbstractBaseUser | AnonymousUser, pk: int) -> GatewayKey:
    """The key ``pk`` if ``user`` may see it. Raises NotFound, with the same message
    whether it is someone else's or does not exist."""
    key = gateway_keys_visible_to(user).filter(pk=pk).first()
    if key is None:
        raise NotFound(f"No gateway key with id {pk}.")
    return key


def gateway_key_status(key: GatewayKey, *, now: datetime) -> str:
    """``revoked`` once revoked (whatever its expiry), else ``expired`` from its expiry
    on (the gateway refuses it from that instant), else ``active``."""
    if key.revoked_at is not None:
        return REVOKED
    if key.expires_at is not None and key.expires_at <= now:
        return EXPIRED
    return ACTIVE


@dataclass(kw_only=True)
class UsageFigures:
    """What a set of requests used: how many, how many were refused or cut off by the
    client, their tokens, their API list-price equivalent and what the platform key
    actually billed for them."""

    requests: int = 0
    refused: int = 0
    disconnected: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    list_usd: Decimal = Decimal(0)
    billed_usd: Decimal = Decimal(0)

    def add(self, other: UsageFigures) -> None:
        for name in FIGURES:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(kw_only=True)
class ModelUsage(UsageFigures):
    model: str


@dataclass(kw_only=True)
class ServedByUsage(UsageFigures):
    """Requests a credential served: ``kind`` ``subscription`` (a plan, by its name) or
    ``api_key`` (the platform key); both empty for requests nothing served."""

    kind: str
    name: str


@dataclass(kw_only=True)
class KeyUsage(UsageFigures):
    key_id: int
    key_name: str
    key_prefix: str
    owner: str
    models: list[ModelUsage] = field(default_factory=list)
    served_by: list[ServedByUsage] = field(default_factory=list)


@dataclass(kw_only=True)
class OwnerUsage(UsageFigures):
    owner: str
    keys: int = 0
    models: list[ModelUsage] = field(default_factory=list)
    served_by: list[ServedByUsage] = field(default_factory=list)


@dataclass(kw_only=True)
class UsageSummary:
    since: datetime | None
    until: datetime | None
    keys: list[KeyUsage]
    owners: list[OwnerUsage]
    totals: UsageFigures


def _sums() -> dict[str, Any]:
    sums: dict[str, Any] = {
        "requests": Count("pk"),
        "refused": Count("pk", filter=REFUSED),
        "disconnected": Count("pk", filter=Q(disconnected=True)),
    }
    sums.update({name: Sum(name) for name in (*TOKEN_FIGURES, *USD_FIGURES)})
    return sums


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name in FIGURES}


def _merged(groups: list[Any], label: Any) -> list[Any]:
    """``groups`` (ModelUsage or ServedByUsage) merged by ``label``, busiest first."""
    zero = _figures(UsageFigures().__dict__)
    merged: dict[Any, Any] = {}
    for group in groups:
        key = label(group)
        if key not in merged:
            merged[key] = replace(group, **zero)
        merged[key].add(group)
    return sorted(merged.values(), key=lambda g: (-g.requests, label(g)))


def gateway_usage_summary(
    *, keys: QuerySet[GatewayKey], since: datetime | None = None, until: datetime | None = None
) -> UsageSummary:
    """The usage of ``keys`` over ``since <= at < until`` (either open when None):
    per key (with its figures by model and by the credential that served), per owner
    (the same, over their keys) and overall. Keys with no request in the range are
    left out. Two grouped queries, whatever the number of rows."""
    rows = GatewayUsage.objects.filter(key__in=keys.values("pk"))
    if since is not None:
        rows = rows.filter(at__gte=since)
    if until is not None:
        rows = rows.filter(at__lt=until)
    by_model = rows.values(
        "key_id", "key__name", "key__prefix", "key__owner__username", "model"
    ).annotate(**_sums())
    by_credential = rows.values("key_id", "served_by_kind", "served_by_name").annotate(**_sums())
    per_key: dict[int, KeyUsage] = {}
    for row in by_model.order_by():
        key = per_key.get(row["key_id"])
        if key is None:
            key = per_key[row["key_id"]] = KeyUsage(
                key_id=row["key_id"],
                key_name=row["key__name"],
                key_prefix=row["key__prefix"],
                owner=row["key__owner__username"],
            )
        group = ModelUsage(model=row["model"], **_figures(row))
        key.models.append(group)
        key.add(group)
    for row in by_credential.order_by():
        served = ServedByUsage(
            kind=row["served_by_kind"], name=row["served_by_name"], **_figures(row)
        )
        per_key[row["key_id"]].served_by.append(served)
    return _summary(list(per_key.values()), since=since, until=until)


def _summary(
    keys: list[KeyUsage], *, since: datetime | None, until: datetime | None
) -> UsageSummary:
    """Each key's groups ordered, its owner's figures folded from its keys', and the
    totals from the owners'."""
    owners: dict[str, OwnerUsage] = {}
    for key in sorted(keys, key=lambda k: (k.owner, k.key_name, k.key_id)):
        key.models = _merged(key.models, lambda g: g.model)
        key.served_by = _merged(key.served_by, lambda g: (g.kind, g.name))
        owner = owners.setdefault(key.owner, OwnerUsage(owner=key.owner))
        owner.add(key)
        owner.keys += 1
        owner.models.extend(key.models)
        owner.served_by.extend(key.served_by)
    totals = UsageFigures()
    for owner in owners.values():
        owner.models = _merged(owner.models, lambda g: g.model)
        owner.served_by = _merged(owner.served_by, lambda g: (g.kind, g.name))
        totals.add(owner)
    return UsageSummary(
        since=since,
        until=until,
        keys=sorted(keys, key=lambda k: (k.owner, k.key_name, k.key_id)),
        owners=list(owners.values()),
        totals=totals,
    )
