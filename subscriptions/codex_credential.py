"""A ChatGPT/Codex plan's credential: what the Codex CLI's ChatGPT sign-in stores.

``codex login`` writes ``$CODEX_HOME/auth.json``::

    {"OPENAI_API_KEY": null,
     "tokens": {"id_token": "<JWT>", "access_token": "<JWT>",
                "refresh_token": "<opaque>", "account_id": "<uuid>"},
     "last_refresh": "<ISO-8601>"}

An operator registers a Codex plan by pasting that file (or just its ``tokens``
object); a bare access token is accepted too, and then the plan cannot be refreshed
once it expires. The platform stores the parsed credential as compact JSON in the
subscription's encrypted token field and is the one owner that refreshes it
(``subscriptions/codex_refresh.py``): agents only ever see a forwarder capability.

Pure: no Django, no I/O. Messages name the field that is wrong, never a value. The
JWTs are decoded, not verified: the provider verifies them; the platform only reads
the access token's expiry and the account id the sign-in carries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from routing.credential_shapes import JWT_PREFIX, JWT_SHAPE
from trinity_contract.codex import claimed_account, jwt_claims


class CodexCredentialError(ValueError):
    """What is wrong with a pasted Codex credential (no value in the message)."""


@dataclass(frozen=True, slots=True)
class CodexCredential:
    """A plan's tokens. ``refresh_token`` is empty for a pasted bare access token, and
    ``account_id`` when that token names no account."""

    access_token: str = field(repr=False)
    refresh_token: str = field(repr=False)
    account_id: str
    id_token: str = field(default="", repr=False)

    @property
    def refreshable(self) -> bool:
        return bool(self.refresh_token)

    def expires_at(self) -> datetime | None:
        """The access token's ``exp``, or None when it names none."""
        exp = jwt_claims(self.access_token).get("exp")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            return None
        return datetime.fromtimestamp(exp, tz=UTC)

    def rotated(self, *, access_token: str, refresh_token: str, id_token: str) -> CodexCredential:
        """The credential after a refresh: new tokens, the same account. A refresh
        answer without a new refresh or id token keeps the old one."""
        return replace(
            self,
            access_token=access_token,
            refresh_token=refresh_token or self.refresh_token,
            id_token=id_token or self.id_token,
        )

    def dumps(self) -> str:
        """The stored form (the plaintext of the subscription's encrypted token)."""
        return json.dumps(
            {
                "access_token": self.access_token,
                "refresh_token": self.refresh_token,
                "account_id": self.account_id,
                "id_token": self.id_token,
            },
            separators=(",", ":"),
            sort_keys=True,
        )


def _text(tokens: dict[str, Any], name: str) -> str:
    value = tokens.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CodexCredentialError(f"tokens.{name} must be a string.")
    return value.strip()


def _from_tokens(tokens: dict[str, Any]) -> CodexCredential:
    access = _text(tokens, "access_token")
    if not access:
        raise CodexCredentialError("tokens.access_token is missing.")
    if not jwt_claims(access):
        raise CodexCredentialError("tokens.access_token is not a JWT (three dot-separated parts).")
    refresh = _text(tokens, "refresh_token")
    if not refresh:
        raise CodexCredentialError(
            "tokens.refresh_token is missing: paste the whole auth.json `codex login` wrote."
        )
    id_token = _text(tokens, "id_token")
    account = _text(tokens, "account_id") or claimed_account(id_token, access)
    if not account:
        raise CodexCredentialError("tokens.account_id is missing and no token names the account.")
    return CodexCredential(access, refresh, account, id_token)


def codex_credential_parse(text: str) -> CodexCredential:
    """The credential an operator pasted: auth.json, its ``tokens`` object, or a bare
    JWT access token. Raises CodexCredentialError."""
    text = text.strip()
    if not text.startswith("{"):
        if not (JWT_SHAPE.match(text) and text.startswith(JWT_PREFIX)):
            raise CodexCredentialError(
                "A ChatGPT/Codex plan credential is the auth.json `codex login` wrote, "
                "or its access token (a JWT: three dot-separated parts starting with 'eyJ')."
            )
        return CodexCredential(text, "", claimed_account(text))
    try:
        document = json.loads(text)
    except ValueError:
        raise CodexCredentialError("The credential is not valid JSON.") from None
    tokens = document.get("tokens", document)  # text starting "{" is an object
    if not isinstance(tokens, dict):
        raise CodexCredentialError("tokens must be an object.")
    return _from_tokens(tokens)


def codex_credential_load(stored: str) -> CodexCredential:
    """The credential from its stored form (``CodexCredential.dumps``), or from a bare
    access token stored before Codex plans could be refreshed. Raises
    CodexCredentialError when it is neither."""
    if not stored.startswith("{"):
        return codex_credential_parse(stored)
    try:
        document = json.loads(stored)
        return CodexCredential(
            str(document["access_token"]),
            str(document.get("refresh_token") or ""),
            str(document["account_id"]),
            str(document.get("id_token") or ""),
        )
    except (ValueError, KeyError, TypeError):
        raise CodexCredentialError("The stored Codex credential is unreadable.") from None
