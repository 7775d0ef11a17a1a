"""A verified sign-in at the provider becomes an account here."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction

from trinity.audit.models import ActorKind, Source
from trinity.audit.services import Actor, Change, audit_record
from trinity.sso.claims import admin_verdict, base_username, username_candidates
from trinity.sso.models import SsoIdentity


def _identity_create(
    *, issuer: str, subject: str, claims: Mapping[str, Any], now: datetime
) -> SsoIdentity:
    """A new account for a first sign-in, under the first free name it asks for; the
    identity that won when the same person signs in twice at once."""
    base = base_username(claims) or f"sso-{secrets.token_hex(4)}"
    reserved = frozenset(settings.TRINITY_BREAK_GLASS_USERS)
    email = claims.get("email") if isinstance(claims.get("email"), str) else ""
    for username in username_candidates(base, reserved=reserved):
        if User.objects.filter(username=username).exists():
            continue
        try:
            with transaction.atomic():
                # No password: this account signs in only through the provider.
                user = User.objects.create_user(username=username, email=email)
                return SsoIdentity.objects.create(
                    user=user, issuer=issuer, subject=subject, created_at=now, last_sign_in_at=now
                )
        except IntegrityError:
            won = SsoIdentity.objects.filter(issuer=issuer, subject=subject).first()
            if won is not None:
                return won
    raise SuspiciousOperation(f"no free account name for {base!r}")


@transaction.atomic
def sso_identity_sign_in(*, issuer: str, claims: Mapping[str, Any], now: datetime) -> User:
    """The account of the person the provider vouched for, created on their first
    sign-in (keyed by issuer and ``sub``; never an existing local account of the same
    name). Admin follows the groups claim when ``TRINITY_OIDC_ADMIN_GROUP`` is set: set
    when it lists the group, cleared when it no longer does. The email follows the
    provider's. Returns the user, inactive ones too (the caller refuses those).
    Raises SuspiciousOperation when the claims name no subject."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SuspiciousOperation("the provider's claims name no subject")
    identity = (
        SsoIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    created = identity is None
    if identity is None:
        identity = _identity_create(issuer=issuer, subject=subject, claims=claims, now=now)
    user = identity.user
    changed = _follow_claims(user, claims)
    if changed:
        user.save(update_fields=list(changed))
    if created or changed:
        _audit_account(user, created=created, changed=changed)
    SsoIdentity.objects.filter(pk=identity.pk).update(last_sign_in_at=now)
    return user


def _follow_claims(user: User, claims: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Set the account's admin role and email from the provider's claims; returns
    ``{field: [before, after]}`` of what changed."""
    changed: dict[str, list[Any]] = {}
    admin = admin_verdict(
        claims.get(settings.TRINITY_OIDC_GROUPS_CLAIM), settings.TRINITY_OIDC_ADMIN_GROUP
    )
    if admin is not None and user.is_staff != admin:
        changed["is_staff"] = [user.is_staff, admin]
        user.is_staff = admin
    email = claims.get("email")
    if isinstance(email, str) and email and user.email != email:
        changed["email"] = [user.email, email]
        user.email = email
    return changed


def _audit_account(user: User, *, created: bool, changed: dict[str, list[Any]]) -> None:
    """The account the provider's claims made or changed, in the audit log: the
    platform did it (actor system, source system), following the provider; the
    sign-in itself is the next entry (``trinity/audit/signals.py``)."""
    audit_record(
        actor=Actor(kind=ActorKind.SYSTEM),
        source=Source.SYSTEM,
        change=Change(
            action="user.create" if created else "user.update",
            object_type="user",
            object_id=str(user.pk),
            object_label=user.get_username(),
            changes={"username": [None, user.get_username()], **changed} if created else changed,
        ),
    )
