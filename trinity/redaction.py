"""Keep credentials out of logs and error texts.

Two nets: every value that became a ``Secret`` in this process is registered and
replaced wherever it appears, and anything shaped like a provider credential is
masked even if it was never registered (a token pasted into an error message).
"""

from __future__ import annotations

import logging
import re
import threading

_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9]+-[A-Za-z0-9_\-]{6,}"),  # Anthropic OAuth tokens / API keys
    re.compile(r"sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI-style keys
    re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),  # JWTs (Codex)
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
]

_known: set[str] = set()
_known_lock = threading.Lock()
_MIN_REGISTERED_LENGTH = 8  # shorter values would mask ordinary words


_longest_first: tuple[str, ...] = ()


def register_secret(value: str) -> None:
    global _longest_first
    if len(value) >= _MIN_REGISTERED_LENGTH and value not in _known:
        with _known_lock:
            if value not in _known:
                _known.add(value)
                _longest_first = tuple(sorted(_known, key=len, reverse=True))


def redact(text: str) -> str:
    """Return ``text`` with every known or credential-shaped value masked."""
    if not text:
        return text
    for value in _longest_first:
        if value in text:
            text = text.replace(value, "[redacted]")
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + "[redacted]", text)
        else:
            text = pattern.sub("[redacted]", text)
    return text


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites the rendered message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
