"""Readers of one JSON value against the shape the engine gives it; each returns the
value to forward (rebuilt, in canonical form) or raises Refused naming where.

A ``Reader`` takes the value and where it sits (``HostConfig.CapAdd``) for messages;
messages name fields, never values (an environment, a secret's data and an id are
the client's). ``DROP`` from a reader leaves the field out of
the rebuilt object (what the engine would ignore anyway).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
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
                raise Refused(f"{where}.{shown(key)} is not a field the agent runtime sends")
            field = fields[name](item, f"{where}.{name}")
            if field is not DROP:
                rebuilt[name] = field
        missing = [name for name in needed if name not in rebuilt]
        if missing:
            raise Refused(f"the agent runtime always sets {where}.{missing[0]}")
        return rebuilt

    return read


def exactly(expected: Any) -> Reader:
    """The one value the runtime sends (type included: ``0`` is not ``false``)."""

    def read(value: Any, where: str) -> Any:
        if type(value) is not type(expected) or value != expected:
            raise Refused(f"{where} must be {expected!r} for an agent")
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
        raise Refused(f"{where} must be a positive integer (a limit) for an agent")
    return value


def non_negative_int(value: Any, where: str) -> int:
    """An int64 of zero or more (a reservation, a grace period)."""
    if type(value) is not int or not 0 <= value <= INT64_MAX:
        raise Refused(f"{where} must be an integer of zero or more")
    return value


def file_mode(value: Any, where: str) -> int:
    """A permission mode: an integer of at most 0o7777 (no file type bits)."""
    if type(value) is not int or not 0 <= value <= 0o7777:
        raise Refused(f"{where} must be a permission mode")
    return value


def matching(pattern: re.Pattern[str], rule: str) -> Reader:
    """A string ``pattern`` matches whole; ``rule`` says what it must be."""

    def read(value: Any, where: str) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise Refused(f"{where} must be {rule}")
        return value

    return read


def member(allowed: Callable[[], Collection[str]], rule: str) -> Reader:
    """A string among ``allowed()`` (asked when a value is read); ``rule`` names them."""

    def read(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in allowed():
            raise Refused(f"{where} must be {rule}")
        return value

    return read


def list_of(item: Reader, *, most: int, least: int = 0) -> Reader:
    """A list of ``least`` to ``most`` values, each read by ``item``."""

    def read(value: Any, where: str) -> list[Any]:
        if not isinstance(value, list) or not least <= len(value) <= most:
            count = f"exactly {most}" if least == most else f"{least} to {most}"
            raise Refused(f"{where} must be a list of {count} item(s) for an agent")
        return [item(entry, f"{where}[{i}]") for i, entry in enumerate(value)]

    return read


def empty(value: Any, where: str) -> object:
    """Absent in effect: null or an empty string (the SDK sends a mount's null Source)."""
    if value not in (None, ""):
        raise Refused(f"{where} must be empty for an agent")
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
