from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.test import override_settings
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.agents.factories import UserFactory

# With CI=true an unexpected skip fails the run; tests/skip_policy.py lists the allowed.
# tests/session_canary.py seeds every factory token with a marker and fails the run
# if the marker reaches a response, a log line, a stored row or a database dump.
# tests/containers.py holds the container tests' fixtures (the engine, the agent image,
# the agents' network): a plugin, so tests/docker and tests/deploy share one of each
# per run (a fixture re-exported by two conftests is two session fixtures).
pytest_plugins = ["tests.skip_policy", "tests.session_canary", "tests.containers"]


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # Every user a test makes gets a hashed password; PBKDF2 costs ~0.2 s each, and
    # hashing strength is not what these tests are about.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Webhook receivers in tests listen on loopback, which production refuses unless the
# admin lists it (TRINITY_WEBHOOK_ALLOW); the two fuzz hosts are names that never
# resolve. tests/operations/test_webhooks.py clears this to prove the refusals.
TEST_WEBHOOK_ALLOW = ("127.0.0.0/8", "::1", "hooks.example.test", "hooks.example.invalid")


@pytest.fixture(autouse=True)
def _webhooks_may_reach_test_receivers(settings: Any) -> None:
    settings.TRINITY_WEBHOOK_ALLOW = TEST_WEBHOOK_ALLOW


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Start and end every test with an empty Redis cache. The embedded database
    cache lives in the test database, which each test already rolls back or flushes."""
    if isinstance(caches["default"], DatabaseCache):
        yield
        return
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner(db: None) -> User:
    return UserFactory.create(username="owner")


@pytest.fixture
def other_user(db: None) -> User:
    return UserFactory.create(username="other")


@pytest.fixture
def admin_user(db: None) -> User:
    return UserFactory.create(username="admin", is_staff=True, is_superuser=True)


def _client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner: User) -> APIClient:
    return _client_for(owner)


@pytest.fixture
def other_client(other_user: User) -> APIClient:
    return _client_for(other_user)


@pytest.fixture
def admin_client_api(admin_user: User) -> APIClient:
    return _client_for(admin_user)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture(scope="package")
def simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorProcess]:
    """A real provider-simulator process per test package.

    Per package, not per session: a CLI or probe abandoned by one package's test can
    still reach the simulator moments later, and must not land in another package's
    request log.
    """
    with SimulatorProcess(log_path=tmp_path_factory.mktemp("sim") / "simulator.log") as sim:
        yield sim


@contextlib.contextmanager
def celery_eager() -> Iterator[None]:
    """Celery runs tasks in-line inside: an on-commit task, an eta message and a retry
    (whose countdown eager mode ignores) all run at once."""
    from trinity.celery import app

    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = False


@pytest.fixture
def eager() -> Iterator[None]:
    """``celery_eager`` for the whole test."""
    with celery_eager():
        yield


def sign_in_urls(base_url: str) -> dict[str, str]:
    """The settings that point a plan's sign-in from the panel at the simulator."""
    return {
        "TRINITY_CLAUDE_OAUTH_AUTHORIZE_URL": base_url + "/oauth/authorize",
        "TRINITY_CLAUDE_OAUTH_TOKEN_URL": base_url + "/v1/oauth/token",
        "TRINITY_CHATGPT_OAUTH_AUTHORIZE_URL": base_url + "/oauth/authorize",
        "TRINITY_CHATGPT_DEVICE_URL": base_url + "/codex/device",
    }


@contextlib.contextmanager
def platform_on(
    simulator: SimulatorProcess, tmp_path: Path, **extra: Any
) -> Iterator[SimulatorControl]:
    """The simulator, reset, as the platform's upstream, with ``extra`` settings; agents
    live under tmp_path. Celery runs eagerly so on-commit effects (hot-reloads,
    starts) happen in-line. Every agent server started inside is stopped at the end."""
    from agents import lifecycle
    from agents.models import Agent
    from agents.runtimes import local

    simulator.control.reset()
    with override_settings(
        **extra,
        TRINITY_ANTHROPIC_BASE_URL=simulator.base_url,
        TRINITY_CODEX_BASE_URL=simulator.base_url,
        TRINITY_CODEX_AUTH_URL=simulator.base_url,
        TRINITY_OPENAI_BASE_URL=simulator.base_url,
        **sign_in_urls(simulator.base_url),
        VAR_DIR=tmp_path,
    ):
        try:
            with celery_eager():
                yield simulator.control
        finally:
            for agent in Agent.objects.exclude(process_handle=""):
                lifecycle.agent_stop(agent=agent)
            # As root each local agent had an OS user of its own, tagged with this
            # VAR_DIR: the rows roll back, the users must not pile up on the machine.
            local.os_users_remove_all()


@pytest.fixture
def control(simulator: SimulatorProcess, tmp_path: Path) -> Iterator[SimulatorControl]:
    """The package's simulator as the platform's upstream (``platform_on``)."""
    with platform_on(simulator, tmp_path) as upstream:
        yield upstream


@pytest.fixture(scope="session", autouse=True)
def _no_orphan_agent_servers() -> Iterator[None]:
    """Agent servers run in their own session (they outlive a web restart by design);
    make sure none this test run spawned outlives the run, even after a failure."""
    yield
    import os
    import signal

    from agents.runtimes import local

    for pid, child in list(local._children.items()):
        if child.poll() is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait(timeout=10)
    # Nor any OS user made for an agent of a test's VAR_DIR (as root, one per agent).
    for tag in list(local.user_tags):
        local.os_users_remove_all(tag)
