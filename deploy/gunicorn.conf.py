"""gunicorn's configuration for the web process: `gunicorn -c deploy/gunicorn.conf.py`.

Each worker is a uvicorn worker (``uvicorn_worker.UvicornWorker``) serving
``trinity.asgi:application``: one event loop carries every socket of the process, so
a live turn's event stream (``GET /api/executions/{id}/events``, a StreamingHttpResponse
over an async iterator) costs a socket and a little memory, not a thread, however long
it stays open.

Django's sync code (middleware, the DRF views, the ORM) still runs on threads: asgiref
gives each request a ThreadSensitiveContext with a one-thread executor of its own, made
for that request and ended with it. A sync turn (``POST /api/agents/{name}/task`` or
``/chat``) waits on its agent server in that thread for as long as the turn runs, up to
TRINITY_TURN_TIMEOUT_MAX_SECONDS, as it did under gthread; the backend's own work per
turn is about a millisecond of Python, and a waiting thread sits in a socket read with
the GIL released.

How many threads: asgiref bounds none of them (the ASGI_THREADS variable it once read
was removed in asgiref 3.5.3, and it only ever sized the loop's default executor,
which Django's thread-sensitive calls do not use). ``trinity/asgi.py``'s RequestSlots
is the bound: at most WEB_THREADS requests (32 by default) are inside Django at once
per process; the next waits on the loop, holding no thread, as a request waited for a
free gthread thread before. An event stream gives its slot back when its headers go
out, so streams never count against it.

Database connections: a pool per worker (TRINITY_DB_POOL=1, set below; psycopg_pool
through Django's "pool" option, trinity/settings.py). Each request's thread is new under
ASGI, so a connection kept per thread would be a new one per request (3.6 ms here, 0.27
ms to borrow from the pool); the request borrows one at its first query and gives it
back at its end, as an event stream does after each read
(trinity.middleware.EventStreamReleasesConnections, execution/live/sse.py). A streamed
turn (``"stream": true``) runs in a thread of its own and holds one for its turn; at
most TRINITY_WEB_STREAMED_TURNS (8) run per process, the next is answered 429. So a
worker holds at most WEB_THREADS + TRINITY_WEB_STREAMED_TURNS + 2 connections
(TRINITY_DB_POOL_MAX, 42 by default): 84 for two workers, inside Postgres's default
max_connections of 100 beside the Celery worker and beat.

Why not gevent: it would need monkeypatching before Django, psycopg, redis and httpx are
imported, and a hub that any CPU-bound step (Fernet, JSON, the ranking after a refusal)
blocks for every other request. Why not gthread any more: an event stream would hold a
thread for its whole life, so 32 watchers of live turns would leave no thread for the API.

Every value is read from the environment and a bad one stops the server with its
name, the way trinity/settings.py reads its own (this file loads before Django does,
so it cannot import the settings; WEB_THREADS is read by trinity/asgi.py, in the worker).
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

# gunicorn's name for the application to load; an ASGI one with this worker class.
# Each request runs on a thread of its own (ASGI): the web lends it a pooled database
# connection instead of opening one per request (trinity/settings.py, TRINITY_DB_POOL).
os.environ.setdefault("TRINITY_DB_POOL", "1")

wsgi_app = "trinity.asgi:application"
bind = "0.0.0.0:8000"
worker_class = "uvicorn_worker.UvicornWorker"
workers = _env_int("WEB_CONCURRENCY", 2, minimum=1, maximum=64)
# A uvicorn worker tells the arbiter it is alive from its event loop, every timeout/2,
# whatever its threads are doing, so this only ends a worker whose loop itself is
# stuck; it is still kept above the longest turn, so that it can never be what cuts one.
timeout = TURN_TIMEOUT_MAX_SECONDS + TURN_SLACK_SECONDS
# On a restart (deploy, HUP, SIGTERM) a worker stops accepting and waits this long for
# its in-flight requests: every turn running then may finish instead of being left to
# the reaper as ``worker_lost``. An open event stream is in flight too: it ends with its
# turn's ``end`` event (a turn is bounded by the same maximum) or is cut here, and its
# client resumes from Last-Event-ID on another worker. deploy/compose.yaml's
# stop_grace_period covers it.
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
