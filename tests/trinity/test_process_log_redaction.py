"""Canary: every process logs through redaction, not only the pytest process.

Each test starts a real process (a Celery worker, a Celery beat, ``runserver``,
gunicorn, a management command, an agent server), makes code running in it log a
known token (at WARNING, inside a traceback, in a request line) and reads everything
the process wrote. The token must appear nowhere, while the marker text of the same
lines must appear, so a process that never logged cannot pass.

The processes run on the embedded defaults in a temporary directory (SQLite file,
filesystem broker), listen on loopback only, are bounded in time and are killed at
teardown if they did not stop.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from celery import Celery
from kombu import Connection

from tests.agent_server.support import AgentServer, agent_env
from trinity_contract.redaction import RedactingFilter

REPO = Path(__file__).resolve().parents[2]
CANARY = "sk-ant-oat01-PROCESSCANARY00000000000000000000000000000000042"
CANARY_JWT = "eyJhbGciOiJSUzI1NiJ9.eyJwcm9jZXNzIjoiY2FuYXJ5In0.UFJPQ0VTU2NhbmFyeQ"
BOOT_SECONDS = 90.0

# Runs inside the real worker or beat: the same app `celery -A trinity` loads, plus
# receivers that log the canary once the process has set its logging up (both
# signals fire after Celery's setup_logging). Nothing here ships.
_CELERY_ENTRY = textwrap.dedent(
    """
    import logging, os, sys
    from celery.signals import beat_init, worker_ready
    from celery.utils.log import get_task_logger
    from trinity.celery import app

    TOKEN, JWT = os.environ["CANARY_TOKEN"], os.environ["CANARY_JWT"]

    def emit(sender=None, **kwargs):
        log = logging.getLogger("trinity.canary")
        log.warning("MARKER-warning a careless line: %s", TOKEN)
        get_task_logger("trinity.canary.task").warning("MARKER-task-logger %s", JWT)
        try:
            raise RuntimeError(f"upstream echoed {TOKEN}")
        except RuntimeError:
            log.exception("MARKER-traceback")

    worker_ready.connect(emit, weak=False)
    beat_init.connect(emit, weak=False)
    app.start(sys.argv[1:])
    """
)


def _embedded_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """The embedded default in ``var_dir``: no Postgres, no Redis, nothing shared."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "trinity.settings",
            "TRINITY_VAR_DIR": str(var_dir),
            "LOG_LEVEL": "INFO",
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "CANARY_TOKEN": CANARY,
            "CANARY_JWT": CANARY_JWT,
        }
    )
    env.update(extra)
    return env


class Child:
    """One child process whose stdout and stderr both go to one file."""

    def __init__(self, argv: list[str], *, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def await_text(self, *needles: str, within: float = BOOT_SECONDS) -> str:
        """The output once every needle is in it; fails with the output otherwise."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            text = self.output()
            if all(n in text for n in needles):
                return text
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)  # polling a child's log file, not waiting for time to pass
        missing = [n for n in needles if n not in self.output()]
        raise AssertionError(f"never logged {missing}:\n{self.output()[-4000:]}")

    def stop(self) -> str:
        """Terminate (the whole session), then kill; returns everything it wrote."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    children: list[Child] = []

    def start(argv: list[str], *, env: dict[str, str], name: str) -> Child:
        child = Child(argv, env=env, log_path=tmp_path / f"{name}.log")
        children.append(child)
        return child

    yield start
    for child in children:
        try:
            child.stop()
        except ProcessLookupError:
            pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_clean(output: str, *markers: str) -> None:
    for marker in markers:
        assert marker in output, f"{marker!r} missing:\n{output[-4000:]}"
    assert "[redacted]" in output
    for secret in (CANARY, CANARY_JWT, CANARY[:30]):
        assert secret not in output, f"a token reached the log:\n{output[-4000:]}"


def _broker_options(var_dir: Path) -> dict[str, object]:
    """The filesystem broker trinity/settings.py configures for ``var_dir``."""
    broker = var_dir / "broker"
    return {
        "data_folder_in": str(broker / "queue"),
        "data_folder_out": str(broker / "queue"),
        "processed_folder": str(broker / "processed"),
        "store_processed": False,
        "control_folder": str(broker / "control"),
    }


def test_a_celery_worker_logs_through_redaction(
    spawn: Callable[..., Child], tmp_path: Path
) -> None:
    var_dir = tmp_path / "worker-var"
    worker = spawn(
        [
            sys.executable,
            "-c",
            _CELERY_ENTRY,
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ],
        env=_embedded_env(var_dir),
        name="worker",
    )
    worker.await_text("MARKER-warning", "MARKER-task-logger", "MARKER-traceback")

    # Celery's own paths, in the pool child and the consumer: a real task called
    # with a keyword named by the token fails with the token in its traceback, and a
    # message without a task header is reported (at WARNING) with its whole body.
    sender = Celery("canary-sender", broker="filesystem://")
    sender.conf.broker_transport_options = _broker_options(var_dir)
    task_id = str(uuid.uuid4())
    sender.send_task(
        "subscriptions.cleanup_old_rate_limit_events", kwargs={CANARY: 1}, task_id=task_id
    )
    with Connection("filesystem://", transport_options=_broker_options(var_dir)) as conn:
        queue = conn.SimpleQueue("celery")
        queue.put({"note": f"no task header, only {CANARY}"})
        queue.close()
    worker.await_text(f"[{task_id}] raised unexpected", "Received and deleted unknown message")

    _assert_clean(worker.stop(), "MARKER-traceback", "RuntimeError: upstream echoed", "TypeError")


def test_a_celery_beat_logs_through_redaction(spawn: Callable[..., Child], tmp_path: Path) -> None:
    beat = spawn(
        [sys.executable, "-c", _CELERY_ENTRY, "beat", "--loglevel=INFO", "--max-interval=1"],
        env=_embedded_env(tmp_path / "beat-var"),
        name="beat",
    )
    beat.await_text("MARKER-warning", "MARKER-task-logger", "MARKER-traceback", "beat: Starting")

    _assert_clean(beat.stop(), "MARKER-warning", "RuntimeError: upstream echoed")


def test_a_management_command_logs_through_redaction(
    spawn: Callable[..., Child], tmp_path: Path
) -> None:
    code = (
        "import logging, os\n"
        "log = logging.getLogger('trinity.canary')\n"
        "log.warning('MARKER-warning %s', os.environ['CANARY_TOKEN'])\n"
        "try:\n"
        "    raise RuntimeError('upstream echoed ' + os.environ['CANARY_TOKEN'])\n"
        "except RuntimeError:\n"
        "    log.exception('MARKER-traceback')\n"
    )
    command = spawn(
        [sys.executable, "manage.py", "shell", "--no-startup", "-c", code],
        env=_embedded_env(tmp_path / "command-var"),
        name="command",
    )
    command.proc.wait(timeout=BOOT_SECONDS)

    _assert_clean(command.stop(), "MARKER-warning", "RuntimeError: upstream echoed")


@pytest.mark.parametrize("server", ["runserver", "gunicorn", "uvicorn", "gunicorn-deployed"])
def test_the_web_process_logs_requests_through_redaction(
    server: str, spawn: Callable[..., Child], tmp_path: Path
) -> None:
    port = _free_port()
    argv = {
        "runserver": [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        "gunicorn": [
            sys.executable,
            "-m",
            "gunicorn",
            "trinity.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--access-logfile",
            "-",
        ],
        # `make run`'s web (deploy/Procfile.dev), access lines on.
        "uvicorn": [
            sys.executable,
            "-m",
            "uvicorn",
            "trinity.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        # As deployed: the conf's uvicorn workers, access lines on.
        "gunicorn-deployed": [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "deploy/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--access-logfile",
            "-",
        ],
    }[server]
    web = spawn(argv, env=_embedded_env(tmp_path / f"{server}-var"), name=server)
    deadline = time.monotonic() + BOOT_SECONDS
    while True:
        try:
            # A token in the path: Django's "Not Found" warning and the server's
            # request line both carry it.
            response = httpx.get(f"http://127.0.0.1:{port}/{CANARY}?key={CANARY_JWT}", timeout=5)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline or web.proc.poll() is not None:
                raise AssertionError(web.output()[-4000:]) from None
            time.sleep(0.2)  # polling for the server to listen
    assert response.status_code == 404
    web.await_text("Not Found: /", "404")

    _assert_clean(web.stop(), "Not Found: /")


def test_an_agent_server_logs_uvicorn_lines_through_redaction(tmp_path: Path) -> None:
    home = tmp_path / "agent"
    home.mkdir()
    env = agent_env(simulator_url="http://127.0.0.1:9", home=home, secret="canary-agent-secret")
    with AgentServer(env=env, log_path=tmp_path / "agent.log") as server:
        assert server.client is not None
        # uvicorn's access line carries the path and query as sent.
        server.client.get(f"/health?token={CANARY}")
        output = server.log_text()
        deadline = time.monotonic() + 10
        while "GET /health?token=" not in output and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the log file for the access line
            output = server.log_text()
    assert "GET /health?token=" in output, output[-4000:]
    assert CANARY not in output and CANARY[:30] not in output, output[-4000:]


def test_every_handler_in_the_web_process_redacts() -> None:
    """After Django configured logging (the pytest process is one), no logger keeps a
    handler of its own that bypasses redaction: Django's ``django.server`` and
    ``mail_admins`` handlers, gunicorn's and Celery's included."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    bare = [
        (logger.name, type(handler).__name__)
        for logger in loggers
        for handler in logger.handlers
        # pytest's own capture handlers are not the product's
        if not type(handler).__module__.startswith("_pytest")
        and not isinstance(handler, logging.NullHandler)
        and not any(isinstance(f, RedactingFilter) for f in handler.filters)
    ]
    assert bare == []
