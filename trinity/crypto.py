"""Secrets at rest and in memory.

Tokens are Fernet-encrypted in the database (MultiFernet: the first configured key
encrypts, every key decrypts). In memory a decrypted value is a ``Secret``, whose
str/repr show only the fingerprint, so an f-string, a log line, a traceback local
or a model repr cannot spill it. ``reveal()`` is the one door to the plaintext.
"""

from __future__ import annotations

import hmac
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

from trinity_contract import redaction


class Secret:
    """A credential value that never prints itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret wraps a str")
        self._value = value
        redaction.register_secret(value)

    def reveal(self) -> str:
        return self._value

    @property
    def fingerprint(self) -> str:
        return fingerprint(self._value)

    def __repr__(self) -> str:
        return f"Secret('…{self.fingerprint}')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return hmac.compare_digest(self._value, other._value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:
        # Pickling would carry the plaintext into a broker or a cache; tasks take ids.
        raise TypeError("Secret values are not picklable")


def fingerprint(value: str) -> str:
    """The last 4 characters: enough to tell tokens apart, too few to use one."""
    return value[-4:] if len(value) >= 8 else ""


@lru_cache(maxsize=8)
def _multifernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _cipher() -> MultiFernet:
    return _multifernet(tuple(settings.TRINITY_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return _cipher().encrypt(plaintext.encode()).decode()


class DecryptionError(Exception):
    """Raised when no configured key decrypts a stored value."""


def decrypt(ciphertext: str) -> str:
    try:
        return _cipher().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise DecryptionError(
            "a stored secret cannot be decrypted with TRINITY_ENCRYPTION_KEYS "
            "(was a key dropped before rotation finished?)"
        ) from None


def needs_rotation(ciphertext: str) -> bool:
    """True when ``ciphertext`` was not encrypted with the primary (first) key."""
    primary = Fernet(settings.TRINITY_ENCRYPTION_KEYS[0])
    try:
        primary.decrypt(ciphertext.encode())
    except InvalidToken:
        return True
    return False


class EncryptedSecretField(models.TextField):
    """A TextField that stores Fernet ciphertext and yields ``Secret`` values."""

    # What django-stubs reads as the field's set/get types.
    _pyi_private_set_type: Secret | str | None  # type: ignore[assignment]
    _pyi_private_get_type: Secret | None  # type: ignore[assignment]

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Secret | None:
        if value is None or value == "":
            return None
        return Secret(decrypt(value))

    def to_python(self, value: Any) -> Secret | None:
        if value is None or isinstance(value, Secret):
            return value
        if value == "":
            return None
        return Secret(str(value))

    def get_prep_value(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        plaintext = value.reveal() if isinstance(value, Secret) else str(value)
        return encrypt(plaintext)

    def value_to_string(self, obj: models.Model) -> str:
        # Serialisation (dumpdata) carries ciphertext, never plaintext.
        return self.get_prep_value(self.value_from_object(obj)) or ""
