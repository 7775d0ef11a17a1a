"""``manage.py wait_ready``: the stack's services wait for the migrated schema, then
become their command (deploy/stack.yaml). Real Postgres and Redis, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from tests.operations.services import REPO, platform_env, shared_database_url

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_ready(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - this checkout's manage.py
        [sys.executable, "manage.py", "wait_ready", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _env(tmp_path: Path, database_url: str) -> dict[str, str]:
    if not settings.REDIS_URL:
        pytest.fail("wait_ready's tests need Redis: the stack's broker and cache")
    return platform_env(
        tmp_path / "var",
        DATABASE_URL=database_url,
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database of its own that no migration has touched: what the stack's services
    find while its migrate service has not run yet."""
    url = shared_database_url()
    name = f"wait_ready_{os.getpid()}"
    admin: Any = psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True)
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_it_runs_the_command_in_its_place_once_the_schema_is_migrated(tmp_path: Path) -> None:
    env = _env(tmp_path, shared_database_url())
    result = _wait_ready(
        env, "--timeout", "30", "--", sys.executable, "-c", "import os; print('ran', os.getpid())"
    )
    assert result.returncode == 0, result.stderr
    assert "ready: database ok, migrations ok, cache ok, broker ok" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("ran ")


def test_it_does_not_run_the_command_while_migrations_are_pending(
    tmp_path: Path, empty_database: str
) -> None:
    env = _env(tmp_path, empty_database)
    result = _wait_ready(env, "--timeout", "3", "--", sys.executable, "-c", "print('ran')")
    assert result.returncode == 1
    assert "ran" not in result.stdout
    assert "waiting: migrations pending" in result.stdout
    assert "not ready after 3 s: migrations pending" in result.stderr


def test_without_a_database_it_waits_and_says_for_what(tmp_path: Path) -> None:
    env = _env(tmp_path, "postgres://nobody@127.0.0.1:9/nothing")
    result = _wait_ready(env, "--timeout", "1")
    assert result.returncode == 1
    assert "not ready after 1 s: database unavailable, migrations unavailable" in result.stderr
