"""Structured logs (``LOG_FORMAT=json``): the turn's log context and the one JSON
formatter both sides write with, so a turn's lines read alike wherever it ran.

The platform's dispatch loop opens a ``log_context`` with the execution id, the agent
and the subscription the attempt runs on; an agent server opens one with the execution
id each turn request carries (``agent_server/app.py``), and passes its agent's name to
the formatter. So one id follows a turn across web, worker and agent server. Context
variables, not thread-locals: a gthread worker serves many turns at once, and an agent
server runs each request as its own asyncio task, and each keeps its own.

Redaction applies to every field: the handler's ``RedactingFilter`` rewrites the
message and traceback, and the formatter redacts every string it writes with the same
``Redactor``. A line is one record: ``json.dumps`` escapes C0 control characters, and
``json_line_safe`` the C1 ones and the Unicode line separators it would write raw
(``trinity_contract/log_lines.py``). Standard library only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from trinity_contract.log_lines import json_line_safe
from trinity_contract.redaction import Redactor

# The fields a record carries when they apply; a record's own ``extra`` wins over
# the open context.
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
    that apply, ``exc`` for a traceback and ``stack``; every string redacted.

    A context field comes from the record (its ``extra``, or ``ContextFilter``), else
    from the open ``log_context``; ``agent``, when given, names the one agent this
    process serves (an agent server's) on every line. In a ``logging.config`` dict:
    ``{"()": "trinity_contract.log_json.JsonFormatter",
    "redactor": "ext://trinity_contract.redaction.platform_redactor"}``.
    """

    def __init__(self, redactor: Redactor, *, agent: str = "") -> None:
        super().__init__()
        self.redactor = redactor
        self.agent = agent

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        context = _context.get() or {}
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None) or context.get(name)
            if name == "agent" and self.agent:
                value = self.agent
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
                {k: self.redactor.redact(v) if isinstance(v, str) else v for k, v in entry.items()},
                ensure_ascii=False,
            )
        )
