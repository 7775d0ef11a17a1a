"""gunicorn's configuration for the web process: `gunicorn -c deploy/gunicorn.conf.py`.

A sync turn (``POST /api/agents/{name}/task`` or ``/chat``) waits on its agent server
for as long as the turn runs, up to TRINITY_TURN_TIMEOUT_MAX_SECONDS. So a turn holds
a thread, not a process: gthread workers, each serving ``threads`` requests at once
(32 by default, so 32 concurrent turns per process). A waiting thread sits in a
socket read with the GIL released; the backend's own work per turn is about a
millisecond of Python.

Why gthread and not gevent: gevent would need monkeypatching before Django, psycopg,
redis and httpx are imported, a new dependency, and a hub that any CPU-bound step
(Fernet, JSON, the ranking after a refusal) blocks for every other request; Django's
per-thread database connections, the pooled ``httpx.Client`` (thread-safe) and the
local runtime's reaper threads work as they are under real threads.

Capacity: each busy thread holds one Postgres connection for its turn (Django opens it
at the request's first query and closes it at its end), so the worst case is workers x
threads connections: 2 x 32 = 64 by default, inside Postgres's default
max_connections of 100 beside the Celery worker and beat.

Every value is read from the environment and a bad one stops the server with its
name, the way trinity/settings.py reads its own (this file loads before Django does,
so it cannot import the settings).
"""

from __future__ import annotations

import os
from typing import Any


def _env_int(name: str, default: int, *, minimum: int, maximum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise RuntimeError(f"{name}={raw!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise RuntimeError(f"{name}={value} is outside {minimum}..{maximum}")
    return value


# The same variable, default and bounds as trinity/settings.py (tests/deploy pins that
# the two agree).
TURN_TIMEOUT_MAX_SECONDS = _env_int(
    "TRINITY_TURN_TIMEOUT_MAX_SECONDS", 780, minimum=30, maximum=6 * 3600
)
# What a turn may hold its thread beyond its budget: execution/services.py's
# DEADLINE_SLACK (the client's 30 s margin over the agent server's own timeout, and
# 30 s to finish the row), plus 30 s so gunicorn is never the one that ends a turn.
TURN_SLACK_SECONDS = 60 + 30

wsgi_app = "trinity.wsgi:application"
bind = "0.0.0.0:8000"
worker_class = "gthread"
workers = _env_int("WEB_CONCURRENCY", 2, minimum=1, maximum=64)
threads = _env_int("WEB_THREADS", 32, minimum=2, maximum=256)
# A gthread worker's main loop tells the arbiter it is alive every second however long
# its threads are busy, so this only ends a worker whose loop itself is stuck; it is
# still kept above the longest turn, so that it can never be what cuts one.
timeout = TURN_TIMEOUT_MAX_SECONDS + TURN_SLACK_SECONDS
# On a restart (deploy, HUP, SIGTERM) a worker stops accepting and waits this long for
# its in-flight requests: every turn running then may finish instead of being left to
# the reaper as ``worker_lost``. deploy/compose.yaml's stop_grace_period covers it.
graceful_timeout = TURN_TIMEOUT_MAX_SECONDS + TURN_SLACK_SECONDS
# gunicorn's runtime control socket (for gunicornc) defaults to $HOME/.gunicorn, which
# the image's unprivileged user cannot create under /app, and which two gunicorns on
# one host (a benchmark beside a dev server) would share; nothing here uses it.
control_socket_disable = True

# LOG_FORMAT=json (trinity/settings.py): the arbiter never loads Django, so its own
# lines ("Booting worker", a worker's exit) get the same JSON shape, redaction and
# escapes here; a worker switches to Django's LOGGING when it loads the app.
if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
    # The arbiter's own registry of secrets (trinity_contract/redaction.py).
    _REDACTOR = "ext://trinity_contract.redaction.platform_redactor"
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "redact": {"()": "trinity_contract.redaction.RedactingFilter", "redactor": _REDACTOR},
            "escape": {"()": "trinity_contract.log_lines.EscapingFilter"},
        },
        "formatters": {
            "json": {"()": "trinity_contract.log_json.JsonFormatter", "redactor": _REDACTOR}
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["redact", "escape"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["console"], "level": "INFO"},
        "loggers": {
            name: {"handlers": ["console"], "propagate": False}
            for name in ("gunicorn.error", "gunicorn.access")
        },
    }


def child_exit(server: Any, worker: Any) -> None:
    """prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR, trinity/metrics.py):
    a worker that exited has its live gauges dropped from every later scrape; its
    counters and histograms stay summed, so totals never go backwards on a restart."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
