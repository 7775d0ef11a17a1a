"""Structured logs: the turn's log context and the JSON formatter (``LOG_FORMAT=json``).

The dispatch loop opens a ``log_context`` with the execution id, the agent and the
subscription the attempt runs on; ``ContextFilter`` copies them onto every record
logged inside it, from any module, and ``JsonFormatter`` writes one JSON object per
line. The agent server receives the same execution id in each turn request and logs
it on its own lines (``agent_server/logjson.py``), so one id follows a turn across
web, worker and agent server. Context variables, not thread-locals: a gthread worker
serves many turns at once, and each keeps its own.

Redaction still applies to every field: the handler's ``RedactingFilter`` rewrites
the message and traceback, and the formatter redacts every string it writes. A line is
one record: ``json.dumps`` escapes C0 control characters, and ``json_line_safe`` the
C1 ones and the Unicode line separators it would write raw
(``trinity_contract/log_lines.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from trinity.redaction import redact
from trinity_contract.log_lines import json_line_safe

# The fields a record carries when they apply; a record's own ``extra`` wins.
CONTEXT_FIELDS = ("execution_id", "agent", "subscription")

_context: ContextVar[Mapping[str, str] | None] = ContextVar("trinity_log_context", default=None)


@contextmanager
def log_context(**fields: str) -> Iterator[None]:
    """Add ``fields`` to every record logged inside the block (in this context only)."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def log_context_update(**fields: str) -> None:
    """Change fields of the open context (the subscription an attempt runs on); the
    enclosing ``log_context`` still restores what was there before it."""
    _context.set({**(_context.get() or {}), **fields})


def log_context_get() -> Mapping[str, str]:
    return _context.get() or {}


class ContextFilter(logging.Filter):
    """Copy the open log context onto each record (``record.execution_id`` …)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_context.get() or {}).items():
            if value and not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, pid, the context fields
    that apply, and ``exc`` for a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value:
                entry[name] = str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json_line_safe(
            json.dumps(
                {k: redact(v) if isinstance(v, str) else v for k, v in entry.items()},
                ensure_ascii=False,
            )
        )
