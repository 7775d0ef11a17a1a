"""A session-wide secrets canary (a pytest plugin, loaded from tests/conftest.py).

At the start of the suite every plan token the test factories make
(``tests.subscriptions.factories.plan_token``) is seeded with one marker, unique to
this run. Whatever a token reaches, the marker reaches too, so through the whole run:

- every response a test reads (Django's and DRF's test clients, and httpx: the live
  web processes, agent servers and the simulator) is scanned as it arrives;
- every log line of this process, as the redacting console handler renders it;
- after each database test, every notification, execution and refusal row, and for a
  test that commits (``transaction=True``) a ``pg_dump --data-only`` of the test
  database, where a token must only ever be ciphertext;
- at the end, every log file the other processes wrote under the run's temporary
  directory (agent servers log under their homes, the simulator to its log path,
  web, worker and beat wherever their test put them);
- at the end, every file (whatever its name) in the agents' homes and working
  directories of every ``VAR_DIR`` a test ran with: ``<VAR_DIR>/agents/<name>/`` (the
  agent server's log, where its forwarder logs too, its ``.env`` and state) and the
  local runtime's work roots (the CLI's working directories and HOMEs, outside
  ``var/``: the one each test's settings name, and the default one of every VAR_DIR
  under the run's temporary directory, for servers a test started by itself). A
  token file left where an agent's tools can read it is a hit like a token in a log.
  Work roots live outside the temporary directory, so they are removed once scanned.

Any hit fails the run loudly, naming what leaked (the token's last 4) and where.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "SESSIONCANARY" + secrets.token_hex(6)
LOG_SUFFIXES = {".log", ".out", ".err", ".txt", ".jsonl"}
MAX_FILE_BYTES = 50_000_000


@dataclass(frozen=True)
class Hit:
    where: str
    excerpt: str


_TOKEN_TAIL = re.compile(re.escape(MARKER) + r"[A-Za-z0-9_-]*")
HITS: list[Hit] = []
# The agents' homes and work roots of every VAR_DIR a test ran with; scanned at the end.
AGENT_DIRS: set[Path] = set()
_HANDLER: list[logging.Handler] = []
UNSCANNED: list[str] = []
_current_test = ["(outside any test)"]


def scan(text: str | bytes | None, where: str) -> None:
    """Record a hit when ``text`` carries the marker; the excerpt masks the token."""
    if not text:
        return
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    index = text.find(MARKER)
    if index < 0:
        return
    start = max(0, index - 60)
    # The whole token goes, not just the marker: the report must not leak either.
    excerpt = _TOKEN_TAIL.sub("<CANARY>", text[start : index + 80])
    HITS.append(Hit(where=f"{_current_test[0]}: {where}", excerpt=excerpt))


def _seed_plan_tokens() -> None:
    from tests.subscriptions import factories

    def marked_plan_token() -> str:
        return f"sk-ant-oat01-{MARKER}" + secrets.token_urlsafe(30)

    factories.plan_token = marked_plan_token  # every later import and factory call


def _watch_responses() -> None:
    import httpx
    from django.test.client import Client

    request = Client.request

    def scanned_request(self: Client, **kwargs: Any) -> Any:
        response = request(self, **kwargs)
        if not getattr(response, "streaming", False):
            scan(
                response.content,
                f"response {kwargs.get('REQUEST_METHOD')} {kwargs.get('PATH_INFO')}",
            )
        return response

    Client.request = scanned_request  # type: ignore[method-assign]

    send = httpx.Client.send

    def scanned_send(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = send(self, request, **kwargs)
        if not kwargs.get("stream"):
            scan(response.content, f"response {request.method} {request.url.path}")
        return response

    httpx.Client.send = scanned_send  # type: ignore[method-assign]


def _canary_handler() -> logging.Handler:
    """Formats each record as the console does, after the same redacting filter."""
    from trinity_contract.redaction import RedactingFilter, platform_redactor

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                scan(self.format(record), f"log line ({record.name})")
            except Exception:  # noqa: S110 - a scan must never break logging
                pass

    handler = Handler(level=logging.DEBUG)
    handler.addFilter(RedactingFilter(platform_redactor))
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    return handler


def pytest_configure(config: pytest.Config) -> None:
    _seed_plan_tokens()
    _watch_responses()
    _HANDLER.append(_canary_handler())


def _uses_db(item: pytest.Item) -> tuple[bool, bool]:
    names = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    transactional = "transactional_db" in names or bool(
        marker and (marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    )
    return bool(marker) or bool(names & {"db", "transactional_db"}), transactional


def _scan_rows() -> None:
    from execution.models import Execution
    from subscriptions.models import RateLimitEvent
    from trinity.models import Notification

    for model in (Notification, Execution, RateLimitEvent):
        for row in model.objects.values():
            scan(repr(row), f"{model.__name__} row {row.get('id')}")


def _scan_dump() -> None:
    from django.db import connection

    if connection.vendor != "postgresql" or shutil.which("pg_dump") is None:
        return
    params = connection.settings_dict
    env = {**os.environ, "PGPASSWORD": str(params.get("PASSWORD") or "")}
    command = ["pg_dump", "--data-only", "--no-owner", "-d", params["NAME"]]
    for flag, key in (("-h", "HOST"), ("-p", "PORT"), ("-U", "USER")):
        if params.get(key):
            command += [flag, str(params[key])]
    dump = subprocess.run(command, capture_output=True, env=env, timeout=60, check=True)
    scan(dump.stdout, "pg_dump of the test database")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    from django.db import DatabaseError

    _current_test[0] = item.nodeid
    root = logging.getLogger()
    if _HANDLER and _HANDLER[0] not in root.handlers:
        # Re-attached per test: a test (or Celery) that reconfigures logging drops it.
        root.addHandler(_HANDLER[0])
    yield
    # The test body has run; its fixtures (and the test transaction) are still there.
    _remember_agent_dirs()
    uses_db, transactional = _uses_db(item)
    if uses_db:
        try:
            _scan_rows()
            if transactional:
                _scan_dump()
        except DatabaseError as exc:
            # A test that breaks its own transaction on purpose (an outage) leaves
            # nothing to read; its rows roll back unread. Said at the end, not a hit.
            UNSCANNED.append(f"{item.nodeid}: {type(exc).__name__}")


def _remember_agent_dirs() -> None:
    """Note where this test's agents live (its settings, overrides included, are still
    in force): their homes under VAR_DIR, and the local runtime's work root, the CLI's
    working directories and HOMEs, where the runtime has one."""
    try:
        from django.conf import settings

        from agents.runtimes import local

        AGENT_DIRS.add(Path(settings.VAR_DIR) / "agents")
        work_root = getattr(local, "work_root", None)
        if callable(work_root):
            AGENT_DIRS.add(Path(work_root()))
    except Exception:  # noqa: S110 - a test without Django settings has no agents
        pass


def _scan_files(root: Path, *, every_file: bool = False) -> None:
    for path in root.rglob("*"):
        if (every_file or path.suffix in LOG_SUFFIXES) and path.is_file():
            try:
                if not path.is_symlink() and path.stat().st_size <= MAX_FILE_BYTES:
                    scan(path.read_bytes(), f"file {path}")
            except OSError:
                continue


def _work_roots_below(basetemp: Path) -> set[Path]:
    """The default work roots of the VAR_DIRs this run's tests used (each test's
    tmp_path, or a directory just below it), for agent servers a test started itself."""
    from agents.runtimes.local import default_work_root

    candidates = [basetemp, *basetemp.glob("*"), *basetemp.glob("*/*")]
    return {default_work_root(var_dir) for var_dir in candidates if var_dir.is_dir()}


def _scan_agent_dirs(basetemp: Path | None) -> None:
    """Scan every file in the agents' homes and work roots; remove the work roots
    (they live in the system's temp dir, which pytest does not clean)."""
    directories = set(AGENT_DIRS)
    if basetemp is not None:
        directories |= _work_roots_below(basetemp)
    for directory in sorted(directories):
        try:
            if not directory.is_dir() or directory.is_symlink():
                continue
            _scan_files(directory, every_file=True)
        except OSError:
            continue
        from agents.runtimes.local import WORK_ROOT_PREFIX

        if directory.name.startswith(WORK_ROOT_PREFIX):
            shutil.rmtree(directory, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _current_test[0] = "(end of the run)"
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        try:
            _scan_files(factory.getbasetemp())
        except (OSError, ValueError):
            pass
    try:
        basetemp = factory.getbasetemp() if factory is not None else None
    except (OSError, ValueError):
        basetemp = None
    _scan_agent_dirs(basetemp)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if UNSCANNED and reporter is not None:
        reporter.write_line(
            f"secrets canary: {len(UNSCANNED)} test(s) left a database it could not read "
            f"(an aborted transaction), e.g. {UNSCANNED[0]}"
        )
    if HITS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        lines = [f"SECRETS CANARY: a seeded token leaked {len(HITS)} time(s):"]
        lines += [f"  {hit.where}\n      ...{hit.excerpt}..." for hit in HITS[:50]]
        text = "\n".join(lines)
        if reporter is not None:
            reporter.write_sep("!", "secrets canary", red=True, bold=True)
            reporter.write_line(text, red=True)
        else:
            print(text)
