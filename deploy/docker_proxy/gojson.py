"""Read a JSON document the way the engine's Go decoder does, or refuse it.

Go's encoding/json, decoding into the engine's structs, matches an object's keys to
field names case-insensitively, with Unicode folding (``ſ`` is an ``s``, the Kelvin
sign a ``k``), lets the last of two keys naming one field win, and merges two objects
that name one struct field. Python's json matches keys exactly and keeps the last
duplicate. Rather than re-implement Go's folding, this reader refuses every document
on which the two could read different things:

- two keys in one object that are equal but for ASCII case (``Image`` and ``image``),
  at any depth, in the engine's structs and maps alike;
- a key with a character outside printable ASCII (no field name of the engine has one,
  and Go would fold some of them onto one that does);
- text that is not UTF-8, or starts with a byte-order mark; a lone surrogate (Go would
  read U+FFFD); NaN or Infinity (not JSON; Go refuses them); nesting deeper than
  MAX_DEPTH; anything after the document (Go reads the first value and stops).

What it returns is plain Python data; the caller reads it against a schema and
forwards a body it builds itself, never these bytes.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from .policy import Refused, shown

MAX_DEPTH = 16
_PRINTABLE_KEY = re.compile(r"[\x20-\x7e]*")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    folded: set[str] = set()
    for key, _ in pairs:
        if not _PRINTABLE_KEY.fullmatch(key):
            raise Refused("a key holds a character outside printable ASCII", 400)
        if key.lower() in folded:
            raise Refused(f"the key {shown(key)} appears twice in one object (in any case)", 400)
        folded.add(key.lower())
    return dict(pairs)


def _constant(name: str) -> Any:
    raise Refused(f"{name} is not JSON", 400)


def _check(value: Any, depth: int) -> None:
    """Every string encodes as UTF-8 (no lone surrogate), nesting stays shallow."""
    if depth > MAX_DEPTH:
        raise Refused(f"the document nests deeper than {MAX_DEPTH}", 400)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused("a string holds a lone surrogate", 400) from None
    elif isinstance(value, dict):
        for item in value.values():
            _check(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check(item, depth + 1)


def read_json(raw: bytes) -> Any:
    """The document ``raw`` holds; raises Refused (400) on anything listed above."""
    if raw.startswith(codecs.BOM_UTF8):
        raise Refused("the body starts with a byte-order mark", 400)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("the body is not UTF-8", 400) from None
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise Refused(f"the body is not one JSON document ({exc.msg})", 400) from None
    except RecursionError:
        raise Refused(f"the document nests deeper than {MAX_DEPTH}", 400) from None
    _check(value, 0)
    return value
