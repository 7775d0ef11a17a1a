"""Keep credential values out of log lines and error texts, on both sides.

Two nets: every secret value a process registered with a ``Redactor`` is replaced
wherever it appears, and anything shaped like a credential is masked even if it was
never registered (a token pasted into an error message, a stale key the CLI found on
its own and the provider echoed).

The mechanism is one; each side keeps its own registry and policy:

- the platform's processes (web, worker, beat) hold one registry each,
  ``platform_redactor``: every value that became a ``Secret`` there joins it
  (``register_secret``), and ``redact`` hides them, whole, with the wider net of
  shapes (Anthropic and OpenAI keys, JWTs, bearer tokens);
- each agent server builds its own ``Redactor()`` (``agent_server/__main__.py``) from
  its environment and the credentials it is sent, which masks long values down to
  their last four characters and nets only the Anthropic shape: it also redacts a
  turn's answer, the model's own text, where a JWT or a ``Bearer …`` is content.

``RedactingFilter`` puts a redactor on a log handler; ``log_json.JsonFormatter`` runs
it over every field of a JSON line. Standard library only: the agent server imports it
as the platform does.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

_CREDENTIAL_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE
)

# A pattern with a group keeps what the group matched (``Bearer ``) and masks the rest.
ANTHROPIC_SHAPED: Final = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")
CREDENTIAL_SHAPES: Final = (
    re.compile(r"sk-ant-[A-Za-z0-9]+-[A-Za-z0-9_\-]{6,}"),  # Anthropic OAuth tokens / API keys
    re.compile(r"sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI-style keys
    re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),  # JWTs (Codex)
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
    # Gateway keys (gateway/keys.py: the prefix and 43 URL-safe characters); the few
    # characters a key list shows after the prefix are too short to match.
    re.compile(r"trinity-gw-[A-Za-z0-9_\-]{16,}"),
)

# Shorter values are too likely to be ordinary words ("1", "true") to redact
# everywhere they occur.
MIN_SECRET_LENGTH: Final = 6
# A platform Secret shorter than this would mask ordinary words in every line.
PLATFORM_MIN_SECRET_LENGTH: Final = 8
# Showing the last 4 characters of a short value would reveal most of it.
MIN_LENGTH_FOR_HINT: Final = 16
REDACTED: Final = "[redacted]"


def is_credential_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential."""
    return bool(_CREDENTIAL_NAME.search(name))


def mask(value: str) -> str:
    """`[redacted:…ab12]` for long values, `[redacted]` for short ones."""
    if len(value) >= MIN_LENGTH_FOR_HINT:
        return f"[redacted:…{value[-4:]}]"
    return REDACTED


class Redactor:
    """A thread-safe set of secret values and the function that hides them.

    The defaults are the agent server's policy; ``platform_redactor`` is the
    platform's. ``hint`` masks a long value as ``mask`` does (its last four
    characters), else every value, registered or shaped, becomes ``[redacted]``.
    """

    def __init__(
        self,
        *,
        shapes: Sequence[re.Pattern[str]] = (ANTHROPIC_SHAPED,),
        min_length: int = MIN_SECRET_LENGTH,
        hint: bool = True,
    ) -> None:
        self._shapes = tuple(shapes)
        self._min_length = min_length
        self._mask: Callable[[str], str] = mask if hint else (lambda _value: REDACTED)
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._ordered: tuple[str, ...] = ()

    def add(self, *values: str | None) -> None:
        """Register values; empty ones and those shorter than the policy's minimum
        are ignored."""
        fresh = {v for v in values if v and len(v) >= self._min_length}
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
        """Return ``text`` with every registered or credential-shaped value masked."""
        if not text:
            return text
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, self._mask(secret))
        for shape in self._shapes:
            text = shape.sub(self._mask_match, text)
        return text

    def _mask_match(self, match: re.Match[str]) -> str:
        kept = match.group(1) if match.re.groups else ""
        return kept + self._mask(match.group(0)[len(kept) :])


platform_redactor: Final = Redactor(
    shapes=CREDENTIAL_SHAPES, min_length=PLATFORM_MIN_SECRET_LENGTH, hint=False
)


def register_secret(value: str) -> None:
    """Register a platform secret with this process's ``platform_redactor``."""
    platform_redactor.add(value)


def redact(text: str) -> str:
    """``text`` through this platform process's ``platform_redactor``."""
    return platform_redactor.redact(text)


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record's message and traceback redacted.

    In a ``logging.config`` dict: ``{"()": "trinity_contract.redaction.RedactingFilter",
    "redactor": "ext://trinity_contract.redaction.platform_redactor"}``.
    """

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
