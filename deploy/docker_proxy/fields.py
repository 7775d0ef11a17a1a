"""Readers of one JSON value against the shape the engine gives it; each returns the
value to forward (rebuilt, in canonical form) or raises Refused naming where.

A ``Reader`` takes the value and where it sits (``HostConfig.CapAdd``) for messages;
messages name fields, never values. ``DROP`` from a reader leaves the field out of
the rebuilt object (what the engine would ignore anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .policy import Refused, shown

Reader = Callable[[Any, str], Any]
DROP: Final = object()
INT64_MAX = 2**63 - 1


def struct(fields: Mapping[str, Reader], *, required: Iterable[str] = ()) -> Reader:
    """An engine struct: keys are matched to ``fields`` case-insensitively (as Go's
    decoder does; gojson refused keys equal but for case), a key naming no field is
    refused (Go would ignore it silently), and the rebuilt object uses the canonical
    names. Every name in ``required`` must be present."""
    by_folded = {name.lower(): name for name in fields}
    needed = tuple(required)

    def read(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise Refused(f"{where} is not an object")
        rebuilt: dict[str, Any] = {}
        for key, item in value.items():
            name = by_folded.get(key.lower())
            if name is None:
                raise Refused(f"{where}.{shown(key)} is not part of an agent container's create")
            field = fields[name](item, f"{where}.{name}")
            if field is not DROP:
                rebuilt[name] = field
        missing = [name for name in needed if name not in rebuilt]
        if missing:
            raise Refused(f"an agent container's create sets {where}.{missing[0]}")
        return rebuilt

    return read


def exactly(expected: Any) -> Reader:
    """The one value the runtime sends (type included: ``0`` is not ``false``)."""

    def read(value: Any, where: str) -> Any:
        if type(value) is not type(expected) or value != expected:
            raise Refused(f"{where} must be {expected!r} for an agent container")
        return expected

    return read


def one_of(*allowed: str) -> Reader:
    def read(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise Refused(f"{where} must be one of {', '.join(map(repr, allowed))}")
        return value

    return read


def texts(value: Any, where: str) -> list[str]:
    """A list of strings (a command, an environment): any content, never quoted."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Refused(f"{where} is not a list of strings")
    return list(value)


def positive_int(value: Any, where: str) -> int:
    """An int64 above zero: a limit that limits (0 and -1 mean none to the engine)."""
    if type(value) is not int or not 0 < value <= INT64_MAX:
        raise Refused(f"{where} must be a positive integer (a limit) for an agent container")
    return value


def empty(value: Any, where: str) -> object:
    """Absent in effect: null or an empty string (the SDK sends a mount's null Source)."""
    if value not in (None, ""):
        raise Refused(f"{where} must be empty for an agent container")
    return DROP


def subset(allowed: frozenset[str]) -> Reader:
    """A list of distinct strings, each in ``allowed``."""

    def read(value: Any, where: str) -> list[str]:
        items = texts(value, where)
        extra = sorted(set(items) - allowed)
        if extra or len(set(items)) != len(items):
            named = shown(extra[0]) if extra else "a repeated one"
            raise Refused(f"{where} may name only {', '.join(sorted(allowed))}, not {named}")
        return items

    return read
