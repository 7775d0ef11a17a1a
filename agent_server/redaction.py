"""Keep credential values out of log lines and error text.

Every credential value the server has seen (baseline env, `.env`, reload-token,
auth overrides) is registered with one `Redactor`. Anything shaped like an Anthropic
credential (`sk-ant-...`) is redacted even if it was never registered, because the
CLI or the provider may echo a value the server never held (e.g. a stale key the
CLI found on its own).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Final

_CREDENTIAL_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE
)
_ANTHROPIC_SHAPED = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")

# Shorter values are too likely to be ordinary words ("1", "true") to redact
# everywhere they occur.
MIN_SECRET_LENGTH: Final = 6
# Showing the last 4 characters of a short value would reveal most of it.
MIN_LENGTH_FOR_HINT: Final = 16


def is_credential_name(name: str) -> bool:
    return bool(_CREDENTIAL_NAME.search(name))


def mask(value: str) -> str:
    """`[redacted:…ab12]` for long values, `[redacted]` for short ones."""
    if len(value) >= MIN_LENGTH_FOR_HINT:
        return f"[redacted:…{value[-4:]}]"
    return "[redacted]"


class Redactor:
    """A thread-safe set of secret values and the function that hides them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._ordered: tuple[str, ...] = ()

    def add(self, *values: str | None) -> None:
        fresh = {v for v in values if v and len(v) >= MIN_SECRET_LENGTH}
        if not fresh or fresh <= self._secrets:
            return
        with self._lock:
            self._secrets = self._secrets | fresh
            # Longest first, so a secret that contains another is hidden whole.
            self._ordered = tuple(sorted(self._secrets, key=len, reverse=True))

    def add_credentials_from(self, env: Mapping[str, str]) -> None:
        """Register the values of every credential-looking name in `env`."""
        self.add(*(value for name, value in env.items() if is_credential_name(name)))

    def known(self) -> Iterable[str]:
        return self._ordered

    def redact(self, text: str) -> str:
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, mask(secret))
        return _ANTHROPIC_SHAPED.sub(lambda m: mask(m.group(0)), text)


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record's message and traceback redacted."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True


def install_log_redaction(redactor: Redactor, loggers: Iterable[logging.Logger]) -> None:
    """Add a `RedactingFilter` to every handler of the given loggers."""
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter(redactor))
