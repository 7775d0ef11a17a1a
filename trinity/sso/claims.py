"""Pure rules over a provider's claims: which account name, whether an admin, whether
an ID token is meant for us. No Django, no network."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

# Django's username characters (letters, digits, @ . + - _), at most 150.
USERNAME_MAX: Final = 150
_NOT_USERNAME: Final = re.compile(r"[^\w.@+-]")


def base_username(claims: Mapping[str, Any]) -> str:
    """The account name a first sign-in asks for: ``preferred_username``, else the
    email, else the subject; characters Django refuses become ``_``. "" when the
    claims carry none of them."""
    for name in ("preferred_username", "email", "sub"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return _NOT_USERNAME.sub("_", value.strip())[: USERNAME_MAX - 8]
    return ""


def username_candidates(base: str, *, reserved: frozenset[str]) -> Iterator[str]:
    """``base``, then ``base-2`` .. ``base-50``; never a reserved name (the break-glass
    users: a provider's account must not take a name that may sign in by password)."""
    for n in range(1, 51):
        name = base if n == 1 else f"{base}-{n}"
        if name not in reserved:
            yield name


def groups_of(value: Any) -> frozenset[str]:
    """The groups a groups claim lists: a list of names, or one name as a string."""
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def admin_verdict(groups_claim: Any, admin_group: str) -> bool | None:
    """True when the groups claim lists ``admin_group``, False when it does not (also
    when the claim is missing: membership must be shown, not assumed), None when no
    admin group is configured (sign-in then leaves the admin flag alone)."""
    if not admin_group:
        return None
    return admin_group in groups_of(groups_claim)


def id_token_problem(payload: Mapping[str, Any], *, issuer: str, client_id: str) -> str:
    """Why a signature-checked ID token is not for us ("" when it is): its issuer must
    be the provider's, its audience must include our client id, and with several
    audiences its authorized party must be us (OIDC Core 3.1.3.7). Expiry and nonce
    are checked where the signature is."""
    if str(payload.get("iss", "")).rstrip("/") != issuer.rstrip("/"):
        return "the ID token's issuer is not the provider's"
    audience = payload.get("aud")
    audiences = [audience] if isinstance(audience, str) else list(audience or [])
    if client_id not in audiences:
        return "the ID token is not meant for this client"
    if len(audiences) > 1 and payload.get("azp") != client_id:
        return "the ID token's authorized party is another client"
    if not isinstance(payload.get("sub"), str) or not payload["sub"]:
        return "the ID token names no subject"
    return ""
