"""Sign-in throttling: the panel's session login and API-token authentication.

Ten failed sign-ins in a minute (per client address, and for the login also per
username) and the eleventh attempt is refused with a 429 before its credential is
checked: the password hasher is not called, the token is not looked up. The limit
lives in the shared cache (Redis, or the database cache), so every web process sees
the same count; the window slides, and once it has passed the next attempt is
checked again (time-machine moves DRF's throttle timer, time.time).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth import base_user
from django.contrib.auth.models import User
from django.test import Client
from knox.auth import TokenAuthentication
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.agents.factories import UserFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def password_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call of the real password check, counted (it still runs)."""
    calls: list[str] = []
    real = base_user.check_password  # type: ignore[attr-defined]  # imported there

    def spy(password: str, encoded: str, *args: Any, **kwargs: Any) -> bool:
        calls.append(password)
        return real(password, encoded, *args, **kwargs)

    monkeypatch.setattr(base_user, "check_password", spy)
    yield calls


@pytest.fixture
def token_lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    calls: list[bytes] = []
    real = TokenAuthentication.authenticate_credentials

    def spy(self: TokenAuthentication, key: bytes) -> Any:
        calls.append(key)
        return real(self, key)

    monkeypatch.setattr(TokenAuthentication, "authenticate_credentials", spy)
    yield calls


@pytest.fixture
def alice(db: None) -> User:
    user = UserFactory.create(username="alice")
    user.set_password("the-right-password")
    user.save()
    return user


def _login(client: Client, username: str, password: str, ip: str = "10.0.0.1") -> Any:
    return client.post(
        "/api/auth/login",
        {"username": username, "password": password},
        content_type="application/json",
        REMOTE_ADDR=ip,
    )


def test_the_eleventh_wrong_password_in_a_minute_is_refused_without_checking_it(
    alice: User, password_checks: list[str]
) -> None:
    client = Client()
    with time_machine.travel(START, tick=False) as clock:
        for attempt in range(10):
            assert _login(client, "alice", f"wrong-{attempt}").status_code == 400
            clock.shift(timedelta(seconds=5))
        assert len(password_checks) == 10
        refused = _login(client, "alice", "the-right-password")
        assert refused.status_code == 429
        assert refused.json()["code"] == "throttled"
        assert 1 <= int(refused["Retry-After"]) <= 60
        assert len(password_checks) == 10  # refused before the hasher ran
        assert "_auth_user_id" not in client.session

        # The window slides: the first failure (at START) leaves it at START + 60 s.
        clock.move_to(START + timedelta(seconds=61))
        signed_in = _login(client, "alice", "the-right-password")
        assert signed_in.status_code == 200, signed_in.content
        assert len(password_checks) == 11


def test_failed_sign_ins_count_per_username_across_addresses_and_per_address_across_names(
    alice: User, password_checks: list[str]
) -> None:
    client = Client()
    with time_machine.travel(START, tick=False):
        for attempt in range(10):
            _login(client, "alice", "wrong", ip=f"10.0.1.{attempt}")
        # A distributed guess at one account is held...
        assert _login(client, "alice", "wrong", ip="10.0.2.1").status_code == 429
        # ...and one address guessing many names is held too.
        for attempt in range(10):
            _login(client, f"user{attempt}", "wrong", ip="10.0.3.1")
        assert _login(client, "someone-else", "wrong", ip="10.0.3.1").status_code == 429
        # Someone else, elsewhere, still signs in.
        bob = UserFactory.create(username="bob")
        bob.set_password("bobs-password")
        bob.save()
        assert _login(client, "bob", "bobs-password", ip="10.0.4.1").status_code == 200


def test_the_eleventh_wrong_token_in_a_minute_is_refused_without_looking_it_up(
    alice: User, token_lookups: list[bytes]
) -> None:
    good = AuthToken.objects.create(user=alice)[1]
    client = APIClient(REMOTE_ADDR="10.0.5.1")
    with time_machine.travel(START, tick=False) as clock:
        for attempt in range(10):
            client.credentials(HTTP_AUTHORIZATION=f"Token wrong{attempt:036d}")
            assert client.get("/api/agents").status_code == 401
        assert len(token_lookups) == 10
        client.credentials(HTTP_AUTHORIZATION=f"Token {good}")
        refused = client.get("/api/agents")
        assert refused.status_code == 429
        assert int(refused["Retry-After"]) >= 1
        assert len(token_lookups) == 10  # refused before the lookup

        clock.move_to(START + timedelta(seconds=61))
        assert client.get("/api/agents").status_code == 200
        assert len(token_lookups) == 11


def test_a_good_token_is_never_counted_against_its_address(alice: User) -> None:
    client = APIClient(REMOTE_ADDR="10.0.6.1")
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=alice)[1]}")
    with time_machine.travel(START, tick=False):
        for _ in range(30):
            assert client.get("/api/agents").status_code == 200


def test_the_count_lives_in_the_shared_cache_every_process_reads(alice: User) -> None:
    """Another web process reads the same cache entry: the count is not process-local."""
    from django.core.cache import cache

    from trinity.authentication import SignInFailureThrottle

    with time_machine.travel(START, tick=False):
        for _ in range(3):
            _login(Client(), "alice", "wrong", ip="10.0.7.1")
        key = SignInFailureThrottle(ident="login-ip:10.0.7.1").key
        assert len(cache.get(key)) == 3
