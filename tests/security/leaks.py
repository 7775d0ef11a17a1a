"""Find canaries in text, in every encoding the red-team test can think of.

``find_leaks`` looks for each canary's full value in a text read plainly, reversed,
URL-decoded, JSON-unescaped, with every separator between letters dropped (spaced or
dashed letters, a value split over lines), and inside every base64 run (standard and
URL-safe alphabets, any alignment, so base64 of the value or of a line or a file
holding it) and every hex run. A finding names the canary and the encoding, never the
value, so a failure message built from findings leaks nothing either.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

# Shorter values are too likely to appear by chance (and no secret here is that short).
MIN_CANARY_CHARS = 16
_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX_RUN = re.compile(rb"(?:[0-9a-fA-F]{2}){16,}")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_WHITESPACE = re.compile(rb"\s+")
_JSON_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class Canary:
    name: str  # what the value is, e.g. "plan-a token"; printed in place of the value
    value: str

    def __post_init__(self) -> None:
        if len(self.value) < MIN_CANARY_CHARS:
            raise ValueError(f"canary {self.name!r} is shorter than {MIN_CANARY_CHARS} chars")

    def __repr__(self) -> str:
        return f"Canary({self.name!r})"


@dataclass(frozen=True)
class Finding:
    canary: str
    surface: str
    encoding: str

    def __str__(self) -> str:
        return f"{self.canary} leaked into {self.surface} ({self.encoding})"


def _json_unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        char = match.group(2)
        return _JSON_SIMPLE.get(char, char)

    return _JSON_ESCAPE.sub(replace, text)


def _decoded_runs(raw: bytes) -> Iterator[tuple[str, bytes]]:
    """(encoding, bytes) for every base64 and hex run in ``raw``, whitespace removed
    first so wrapped output (``base64`` breaks lines at 76) decodes whole."""
    packed = _WHITESPACE.sub(b"", raw)
    for match in _BASE64_RUN.finditer(packed):
        run = match.group(0).rstrip(b"=")
        for offset in range(4):
            chunk = run[offset:]
            if len(chunk) % 4 == 1:  # a lone trailing character encodes no byte
                chunk = chunk[:-1]
            if len(chunk) < 16:
                continue
            chunk += b"=" * (-len(chunk) % 4)
            for alphabet in (b"+/", b"-_"):
                try:
                    yield "base64", base64.b64decode(chunk, altchars=alphabet, validate=True)
                except (binascii.Error, ValueError):
                    continue
    for match in _HEX_RUN.finditer(packed):
        for offset in (0, 1):
            chunk = match.group(0)[offset:]
            try:
                yield "hex", binascii.unhexlify(chunk[: len(chunk) - len(chunk) % 2])
            except binascii.Error:
                continue


def _views(text: str) -> Iterator[tuple[str, str]]:
    yield "plain", text
    yield "reversed", text[::-1]
    if "%" in text:
        yield "URL-encoded", unquote(text)
    if "\\" in text:
        yield "JSON-escaped", _json_unescape(text)
    raw = text.encode("utf-8", errors="replace")
    for encoding, decoded in _decoded_runs(raw):
        yield encoding, decoded.decode("latin-1")


def find_leaks(text: str | bytes, canaries: Iterable[Canary], *, surface: str) -> list[Finding]:
    """Every (canary, encoding) found in ``text``; at most one finding per canary."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    remaining = {c.name: c for c in canaries}
    findings: list[Finding] = []
    if not text or not remaining:
        return findings
    squeezed = {name: _NOT_ALNUM.sub("", c.value) for name, c in remaining.items()}
    for encoding, view in _views(text):
        alnum: str | None = None
        for name, canary in list(remaining.items()):
            hit = canary.value in view
            label = encoding
            if not hit and len(squeezed[name]) >= MIN_CANARY_CHARS:
                if alnum is None:
                    alnum = _NOT_ALNUM.sub("", view)
                hit = squeezed[name] in alnum
                label = f"{encoding}, letters spaced or split"
            if hit:
                findings.append(Finding(canary=name, surface=surface, encoding=label))
                del remaining[name]
        if not remaining:
            break
    return findings
