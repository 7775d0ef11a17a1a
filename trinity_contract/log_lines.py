"""One log record, one line: no value a record carries can start a line of its own or
drive the terminal that shows it.

A path, a header or a model's text can hold ``\\n``, ``\\r``, ``ESC`` or any other
control character; written as-is into a plain log line, ``GET /x%0a2026-… WARNING …``
decoded by the server forges a line that reads as the server's own. Both sides (the
platform's processes and every agent server) put ``EscapingFilter`` on their log
handler, after redaction: every control character of the rendered message (C0, DEL,
C1, the Unicode line and paragraph separators, the bidirectional overrides that make a
line display as something else) is written as a visible escape (``\\n``, ``\\x1b``,
``\\u2028``). A traceback keeps its line breaks, but every line of it is indented, so a
record's first line is the only one of it that starts at the left margin: an exception
message cannot forge a record either. JSON lines escape control characters by
construction; ``json_line_safe`` covers what ``json.dumps(ensure_ascii=False)`` writes
raw.

Django-free and dependency-free: the agent server imports it as the platform does.
"""

from __future__ import annotations

import logging
import re

# C0 (tab and newline included), DEL, C1 (NEL, CSI...), the line and paragraph
# separators (str.splitlines and some viewers break lines there), and the
# bidirectional embeddings, overrides and isolates (a line that displays reordered).
_BEYOND_C0 = r"\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x1f{_BEYOND_C0}]")
# The same set without the newline, for a traceback's own line breaks.
_CONTROL_BUT_NEWLINE = re.compile(rf"[\x00-\x09\x0b-\x1f{_BEYOND_C0}]")
# What json.dumps(ensure_ascii=False) leaves raw: it escapes only C0, '"' and '\\'.
_RAW_IN_JSON = re.compile(rf"[{_BEYOND_C0}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
TRACEBACK_INDENT = "  "


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character written as a visible escape."""
    return _CONTROL.sub(_escape, text)


def escape_traceback(text: str) -> str:
    """A traceback (or stack) with its control characters escaped but its line breaks
    kept, each line indented: nothing in it starts at the left margin."""
    escaped = _CONTROL_BUT_NEWLINE.sub(_escape, text)
    return "\n".join(TRACEBACK_INDENT + line for line in escaped.split("\n"))


def json_line_safe(line: str) -> str:
    """A line ``json.dumps(..., ensure_ascii=False)`` wrote, with the characters it
    leaves raw written as ``\\uXXXX`` (still valid JSON: they occur only in strings)."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


class EscapingFilter(logging.Filter):
    """A handler filter that renders the message with its control characters escaped
    and indents the traceback (install it after the redacting filter: it reads the
    message that filter already rendered)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = escape_controls(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        # A record reaches every handler it propagates to: its traceback is indented once.
        if not getattr(record, _DONE, False):
            setattr(record, _DONE, True)
            if record.exc_text:
                record.exc_text = escape_traceback(record.exc_text)
            if record.stack_info:
                record.stack_info = escape_traceback(record.stack_info)
        return True


_DONE = "_trinity_traceback_escaped"
