"""The agent server's structured logs (``LOG_FORMAT=json``): one JSON object per line.

Each turn request carries the platform's execution id; ``turn_log_context`` holds it
(and the agent's name, from ``TRINITY_AGENT_NAME``) for every line logged while the
turn runs, so the server's lines join the web's and worker's lines for the same turn.
A context variable: each request is its own asyncio task with its own copy.

Nothing from the Django side is imported (this mirrors trinity/logging_json.py's
format); every string written is redacted by the server's ``Redactor``, and a line is
one record (``trinity_contract/log_lines.py``: ``json.dumps`` escapes C0 control
characters, ``json_line_safe`` what it would write raw).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from agent_server.redaction import Redactor
from trinity_contract.log_lines import json_line_safe

_execution_id: ContextVar[str | None] = ContextVar("agent_server_execution_id", default=None)


@contextmanager
def turn_log_context(execution_id: str) -> Iterator[None]:
    token = _execution_id.set(execution_id)
    try:
        yield
    finally:
        _execution_id.reset(token)


class JsonFormatter(logging.Formatter):
    """ts, level, logger, message, pid, execution_id and agent where they apply, exc."""

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
        execution_id = _execution_id.get()
        if execution_id:
            entry["execution_id"] = execution_id
        if self.agent:
            entry["agent"] = self.agent
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
