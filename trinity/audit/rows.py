"""A row as the audit log keeps it: its fields as JSON, every secret only by its
fingerprint, and the difference between two such states. Pure but for the field
introspection."""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Model

from trinity.crypto import EncryptedSecretField, Secret, fingerprint

# A text field whose name has one of these words holds a secret or what guards one
# (a password hash, a token digest, a token's key): kept by fingerprint only.
SECRET_WORDS = frozenset({"token", "secret", "password", "digest", "salt", "key"})
_WORD = re.compile(r"[a-z0-9]+")
# Text-like values only: a boolean or a count named after a key is no secret.
_TEXT_TYPES = (str, bytes, Secret)


def secret_named(field: Any) -> bool:
    """True when ``field``'s name says it holds a secret (see ``SECRET_WORDS``)."""
    words = _WORD.findall(field.name.lower())
    return (
        "fingerprint" not in words
        and "prefix" not in words
        and bool(SECRET_WORDS.intersection(words))
    )


def secret_mark(value: Any) -> str | None:
    """What the log keeps of a secret: ``…abcd`` (its fingerprint), ``set`` when it
    is too short to have one, None when there is none."""
    if value is None or value == "":
        return None
    plain = value.reveal() if isinstance(value, Secret) else str(value)
    tail = fingerprint(plain)
    return f"…{tail}" if tail else "set"


def _json_safe(value: Any) -> Any:
    if isinstance(value, Secret):  # never reveal; a Secret in a JSON field is a mistake
        return secret_mark(value)
    try:
        return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
    except TypeError:  # a value JSON cannot carry: its text
        return str(value)


def row_state(instance: Model) -> dict[str, Any]:
    """``instance``'s concrete fields (a foreign key as its id), JSON-safe; a secret
    (an encrypted field, or a text field named like one) as ``secret_mark``."""
    state: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        value = getattr(instance, field.attname)
        if isinstance(field, EncryptedSecretField) or (
            isinstance(value, _TEXT_TYPES) and secret_named(field)
        ):
            state[field.name] = secret_mark(value)
        else:
            state[field.name] = _json_safe(value)
    return state


def changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, list[Any]]:
    """``{field: [before, after]}`` for each field that differs; a created row has
    every field with ``before`` None, a deleted one every field with ``after`` None."""
    old, new = before or {}, after or {}
    return {
        name: [old.get(name), new.get(name)]
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    }
