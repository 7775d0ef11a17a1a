"""One record, one line, in every process: no value can forge a log line.

Each test starts a real process (a management command in plain and JSON format, which
loads the one ``LOGGING`` web, worker and beat load; an agent server and its
forwarder), makes it log a value that holds a
newline followed by a line shaped like the process's own, a carriage return, an
escape sequence and the C1 and Unicode line breaks, and reads everything it wrote. The
forged line must start no line; the value must be there, escaped; a traceback's lines
are indented under their record. (``test_process_log_redaction.py`` runs the same
processes for redaction; its helpers are reused here.)
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.agent_server.support import AgentServer, agent_env
from tests.trinity.test_process_log_redaction import (
    BOOT_SECONDS,
    Child,
    _embedded_env,
    spawn,
)
from trinity_contract.log_lines import (
    EscapingFilter,
    escape_controls,
    escape_traceback,
    json_line_safe,
)
from trinity_contract.redaction import RedactingFilter

__all__ = ["spawn"]  # the fixture, used by name

FORGED = "2026-01-01 00:00:00,000 WARNING agent_server.forwarder forged-line"
# What a client sends: a newline, the forged line, a clear-screen escape, NEL, LS.
SENT = "x%0a" + FORGED.replace(" ", "%20") + "%0d%1b[2J%c2%85%e2%80%a8end"
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _assert_one_line_per_record(output: str) -> None:
    starts = [line for line in output.split("\n") if line.startswith(FORGED)]
    assert starts == [], f"a value started a line of its own:\n{output[-4000:]}"
    assert "\\n" + FORGED in output, f"the value is not there, escaped:\n{output[-4000:]}"
    assert "\\x1b[2J" in output and "\\x85" in output and "\\u2028" in output
    assert not RAW_CONTROLS.search(output), repr(RAW_CONTROLS.search(output))


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain text, unchanged", "plain text, unchanged"),
        ("a\nb", "a\\nb"),
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("\x00\x07\x7f", "\\x00\\x07\\x7f"),
        ("nel\x85 csi\x9b", "nel\\x85 csi\\x9b"),
        ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
        ("rlo\u202egnp.exe", "rlo\\u202egnp.exe"),
        ("é ü 日本 \\n", "é ü 日本 \\n"),  # printable text and a literal backslash stay
    ],
)
def test_every_control_character_is_written_as_an_escape(text: str, escaped: str) -> None:
    assert escape_controls(text) == escaped
    assert "\n" not in escape_controls(text) and len(escape_controls(text).splitlines()) <= 1


def test_a_traceback_keeps_its_lines_each_indented() -> None:
    text = "Traceback (most recent call last):\n  File 'x'\nValueError: a\n" + FORGED + "\x1b"
    lines = escape_traceback(text).split("\n")
    assert lines[0] == "  Traceback (most recent call last):"
    assert lines[-1] == "  " + FORGED + "\\x1b"
    assert all(line.startswith("  ") for line in lines)


def test_a_json_line_carries_no_raw_line_break() -> None:
    line = json_line_safe(json.dumps({"m": "a\x85b\u2028c\n"}, ensure_ascii=False))
    assert json.loads(line) == {"m": "a\x85b\u2028c\n"}
    assert len(line.splitlines()) == 1


def test_every_handler_escapes_after_it_redacts() -> None:
    """After Django configured logging (web, worker, beat and commands all load the one
    ``LOGGING``; the pytest process is one), every handler escapes, and after redaction:
    escaping first could split a token the redactor must still recognise.

    (Django's own "Not Found: <path>" line already escapes the path since 5.2.2; the
    lines of everything else, the platform's own code among them, did not.)"""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    handlers = [
        handler
        for logger in loggers
        for handler in logger.handlers
        # pytest's capture handlers and the session canary's are the tests', not the product's
        if not type(handler).__module__.startswith(("_pytest", "tests."))
        and not isinstance(handler, logging.NullHandler)
    ]
    assert handlers
    for handler in handlers:
        kinds = [type(f) for f in handler.filters]
        assert EscapingFilter in kinds, handler
        assert kinds.index(RedactingFilter) < kinds.index(EscapingFilter), kinds


_COMMAND = (
    "import logging, urllib.parse\n"
    "value = urllib.parse.unquote({sent!r})\n"
    "log = logging.getLogger('trinity.lines')\n"
    "log.warning('MARKER-warning %s', value)\n"
    "try:\n"
    "    raise RuntimeError('upstream said ' + value)\n"
    "except RuntimeError:\n"
    "    log.exception('MARKER-traceback')\n"
)


def test_a_value_cannot_forge_a_line_of_a_command_nor_of_its_traceback(
    spawn: Callable[..., Child], tmp_path: Path
) -> None:
    command = spawn(
        [sys.executable, "manage.py", "shell", "--no-startup", "-c", _COMMAND.format(sent=SENT)],
        env=_embedded_env(tmp_path / "command-var"),
        name="command",
    )
    command.proc.wait(timeout=BOOT_SECONDS)
    output = command.stop()
    _assert_one_line_per_record(output)
    [record] = [line for line in output.split("\n") if "MARKER-traceback" in line]
    after = output.split(record + "\n", 1)[1].split("\n")
    assert after[0] == "  Traceback (most recent call last):", output[-2000:]
    assert any(line.startswith("  RuntimeError: upstream said x") for line in after)


def test_json_lines_stay_one_object_each(spawn: Callable[..., Child], tmp_path: Path) -> None:
    command = spawn(
        [sys.executable, "manage.py", "shell", "--no-startup", "-c", _COMMAND.format(sent=SENT)],
        env=_embedded_env(tmp_path / "json-var", LOG_FORMAT="json"),
        name="json",
    )
    command.proc.wait(timeout=BOOT_SECONDS)
    output = command.stop()
    # Every line the logging wrote is one object (the shell's own banner is not a log line).
    entries = [json.loads(line) for line in output.split("\n") if line.startswith("{")]
    assert len(entries) >= 2
    [warning] = [e for e in entries if e["message"].startswith("MARKER-warning")]
    assert "\\n" + FORGED in warning["message"]
    [failure] = [e for e in entries if e["message"] == "MARKER-traceback"]
    # In JSON too the traceback keeps its lines, indented under the record.
    assert "  RuntimeError: upstream said x\n  " + FORGED in failure["exc"]


def _forwarder_client(log: str) -> httpx.Client:
    """A client of the forwarder wherever its log line says it listens: a Unix socket
    when the CLI runs in a sandbox (no TCP port then), else loopback TCP."""
    found = re.search(r"forwarder listening on (unix:\S+|http://\S+?)[ ,]", log)
    assert found, log[-4000:]
    where = found.group(1)
    if where.startswith("unix:"):
        transport = httpx.HTTPTransport(uds=where.removeprefix("unix:"))
        return httpx.Client(transport=transport, base_url="http://forwarder", timeout=10)
    return httpx.Client(base_url=where, timeout=10)


def test_a_refused_path_cannot_forge_a_line_of_the_agent_servers_log(tmp_path: Path) -> None:
    """A real agent server: its forwarder logs a refused path as it decoded it, and
    uvicorn's access lines (the server's and the forwarder's) carry paths too."""
    home = tmp_path / "agent"
    home.mkdir()
    env = agent_env(simulator_url="http://127.0.0.1:9", home=home, secret="lines-agent-secret")
    with AgentServer(env=env, log_path=tmp_path / "agent.log") as server:
        assert server.client is not None
        forwarder = _forwarder_client(server.log_text())
        with forwarder:
            assert forwarder.post(f"/v1/{SENT}").status_code == 403
            assert forwarder.post("/v1/messages").status_code == 401
        server.client.get(f"/health/{SENT}")
        deadline = time.monotonic() + 10
        while "forwarder: refused POST /v1/x" not in server.log_text():
            if time.monotonic() > deadline:
                raise AssertionError(server.log_text()[-4000:])
            time.sleep(0.1)  # polling the log file for the forwarder's line
        output = server.log_text()
    _assert_one_line_per_record(output)
