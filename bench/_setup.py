"""Boot Django for a benchmark on throwaway backends, never on the ones in use.

The database is a temporary SQLite file unless BENCH_DATABASE_URL names another; the
cache is the embedded default (the database cache, in that SQLite file) unless
BENCH_REDIS_URL names a Redis. DATABASE_URL and
REDIS_URL are ignored on purpose: a benchmark writes thousands of rows and keys.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def boot() -> Path:
    """Configure and set up Django; returns the temporary directory in use."""
    workdir = Path(tempfile.mkdtemp(prefix="trinity-bench-"))
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "trinity.settings"
    os.environ["TRINITY_VAR_DIR"] = str(workdir)
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}"
    )
    os.environ.pop("REDIS_URL", None)
    if os.environ.get("BENCH_REDIS_URL"):
        os.environ["REDIS_URL"] = os.environ["BENCH_REDIS_URL"]
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    call_command("createcachetable", verbosity=0)
    return workdir


def backends() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    cache = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    return f"database={db} cache={cache}"


def line(label: str, measured: float, target: float | None, unit: str) -> str:
    if target is None:
        return f"{label:<58} {measured:9.2f} {unit:<3} (no target; reported)"
    ratio = measured / target
    verdict = "ok" if ratio <= 1 else "OVER"
    return (
        f"{label:<58} {measured:9.2f} {unit:<3} target {target:g} {unit}  "
        f"ratio {ratio:.2f}  {verdict}"
    )
