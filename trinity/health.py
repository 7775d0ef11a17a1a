"""Health endpoints for load balancers and orchestrators: ``/healthz`` and ``/readyz``.

``/healthz`` answers 200 while the process can serve a request at all; it touches
nothing else, so a database outage never gets a healthy web process restarted.
``/readyz`` answers 200 only when the database, the cache and the Celery broker
answer and every migration this code knows is applied, else 503; its body names
each check (``ok``, ``unavailable`` or ``pending``) and never an error text, which
may carry a host name or a URL. Both are off the API: no authentication, no session,
no CSRF cookie, never cached. deploy/compose.yaml's healthchecks use them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)

OK = "ok"
UNAVAILABLE = "unavailable"
PENDING = "pending"
# The longest the broker check waits to connect; a probe must answer before the
# orchestrator's own probe timeout.
BROKER_TIMEOUT_SECONDS = 2
CACHE_KEY = "health:readyz"

# Once this process has seen every migration applied it stops asking: its code (and
# so its migration graph) cannot change under it, and loading the graph is most of
# the check's cost. A failed or pending check is asked again every time.
_migrations_applied = False


@dataclass(frozen=True)
class Readiness:
    """Each check's state; ready when every one is ``ok``."""

    checks: dict[str, str]

    @property
    def ready(self) -> bool:
        return all(state == OK for state in self.checks.values())


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _database() -> str:
    try:
        _select_one()
    except Exception as exc:
        # Any failure means "not ready"; the reason goes to the log (one line: an
        # orchestrator probes every few seconds), not to the answer.
        logger.warning("readyz: the database does not answer: %s", _reason(exc))
        return UNAVAILABLE
    return OK


def _select_one() -> None:
    """``SELECT 1`` on the database. The web's pool (trinity/settings.py,
    TRINITY_DB_POOL) is asked nothing: right after the database comes back it is still
    backing off, and a probe must say what the database says, within its timeout. So
    the pooled web probes on a connection of its own, opened for the probe."""
    connection = connections[DEFAULT_DB_ALIAS]
    if getattr(connection, "pool", None) is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return
    params = {**connection.get_connection_params(), "connect_timeout": BROKER_TIMEOUT_SECONDS}
    with psycopg.connect(**params) as probe:
        probe.execute("SELECT 1").fetchone()


def _migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return OK
    try:
        connection = connections[DEFAULT_DB_ALIAS]
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        logger.warning("readyz: cannot read the applied migrations: %s", _reason(exc))
        return UNAVAILABLE
    if plan:
        logger.warning("readyz: %d migration(s) not applied", len(plan))
        return PENDING
    # A plain assignment: two threads that both saw the plan empty set the same value.
    _migrations_applied = True
    return OK


def _cache() -> str:
    try:
        # A write, not a read: markers and snapshots need the store writable.
        cache.set(CACHE_KEY, "1", timeout=30)
        if cache.get(CACHE_KEY) != "1":
            return UNAVAILABLE
    except Exception as exc:
        logger.warning("readyz: the cache does not answer: %s", _reason(exc))
        return UNAVAILABLE
    return OK


def _broker() -> str:
    from trinity.celery import app

    try:
        with app.connection_for_write() as connection:
            # No retries: a probe reports the broker as it is now. The default channel
            # is what proves the server answered (Redis: a PING on the new channel).
            connection.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_SECONDS)
            connection.default_channel  # noqa: B018 - opening it is the check
    except Exception as exc:
        logger.warning("readyz: the broker does not answer: %s", _reason(exc))
        return UNAVAILABLE
    return OK


def readiness_check() -> Readiness:
    """Ask the database, the migrations, the cache and the broker; never raises."""
    database = _database()
    return Readiness(
        checks={
            "database": database,
            # Without a database there is nothing to read the migrations from.
            "migrations": _migrations() if database == OK else UNAVAILABLE,
            "cache": _cache(),
            "broker": _broker(),
        }
    )


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests."""
    return JsonResponse({"status": OK})


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers and the schema is current, else 503."""
    readiness = readiness_check()
    return JsonResponse(
        {"status": OK if readiness.ready else UNAVAILABLE, "checks": readiness.checks},
        status=200 if readiness.ready else 503,
    )
