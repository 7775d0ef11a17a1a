"""Sign-in throttling: the panel's session login, Django admin's login and API-token
authentication.

Ten failed sign-ins in a minute (per client address, and for a password also per
username) and the eleventh attempt is refused with a 429 before its credential is
checked: the password hasher is not called, the token is not looked up. The limit
lives in the shared cache (Redis, or the database cache), so every web process sees
the same count; the window slides, and once it has passed the next attempt is
checked again (time-machine moves DRF's throttle timer, time.time).

The address is the one the platform saw: ``X-Forwarded-For`` counts only from the
proxies ``TRINITY_TRUSTED_PROXIES`` names, so rotating it buys no new guesses and
borrowing a victim's address locks nobody out; a username's count does not lock its
user out of an address they signed in from before.
"""

from __future__ import annotations

import ipaddress
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
from trinity.authentication import forwarded_client

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


def _login(
    client: Client, username: str, password: str, ip: str = "10.0.0.1", **headers: Any
) -> Any:
    return client.post(
        "/api/auth/login",
        {"username": username, "password": password},
        content_type="application/json",
        REMOTE_ADDR=ip,
        **headers,
    )


def _admin_login(client: Client, username: str, password: str, ip: str = "10.0.0.1") -> Any:
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
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

    from trinity.sign_in_throttle import address_key, pair_key

    with time_machine.travel(START, tick=False):
        for _ in range(3):
            _login(Client(), "alice", "wrong", ip="10.0.7.1")
        assert len(cache.get(pair_key("10.0.7.1", "alice"))) == 3
        assert len(cache.get(address_key("10.0.7.1"))) == 3


def test_rotating_x_forwarded_for_does_not_reset_an_addresss_count(alice: User) -> None:
    client = Client()
    with time_machine.travel(START, tick=False):
        for attempt in range(10):
            # A different name each time: only the address's count can hold this.
            response = _login(
                client,
                f"name{attempt}",
                "wrong",
                ip="10.0.8.1",
                HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}",
            )
            assert response.status_code == 400
        refused = _login(
            client,
            "alice",
            "the-right-password",
            ip="10.0.8.1",
            HTTP_X_FORWARDED_FOR="198.51.100.200",
        )
        assert refused.status_code == 429


def test_rotating_x_forwarded_for_does_not_reset_the_count_of_wrong_tokens(alice: User) -> None:
    client = APIClient(REMOTE_ADDR="10.0.8.2")
    with time_machine.travel(START, tick=False):
        for attempt in range(10):
            client.credentials(
                HTTP_AUTHORIZATION=f"Token wrong{attempt:059d}",
                HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}",
            )
            assert client.get("/api/agents").status_code == 401
        client.credentials(
            HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=alice)[1]}",
            HTTP_X_FORWARDED_FOR="198.51.100.201",
        )
        assert client.get("/api/agents").status_code == 429


def test_a_trusted_proxys_forwarded_for_names_the_client(alice: User, settings: Any) -> None:
    settings.TRINITY_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.9.0/24")]
    client = Client()
    with time_machine.travel(START, tick=False):
        for attempt in range(10):
            _login(
                client,
                f"name{attempt}",
                "wrong",
                ip="10.0.9.1",
                HTTP_X_FORWARDED_FOR="203.0.113.5",
            )
        # The client behind the proxy is held; another client of the same proxy is not.
        held = _login(client, "x", "wrong", ip="10.0.9.1", HTTP_X_FORWARDED_FOR="203.0.113.5")
        assert held.status_code == 429
        other = _login(client, "x", "wrong", ip="10.0.9.1", HTTP_X_FORWARDED_FOR="203.0.113.6")
        assert other.status_code == 400


TRUSTED = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]


@pytest.mark.parametrize(
    ("remote_addr", "forwarded_for", "trusted", "client"),
    [
        # No proxy trusted: the header is never read.
        ("203.0.113.9", "198.51.100.1", [], "203.0.113.9"),
        # The peer is not a proxy of ours: whatever it claims is ignored.
        ("203.0.113.9", "198.51.100.1", TRUSTED, "203.0.113.9"),
        # Through our proxy: the hop it appended.
        ("10.1.1.1", "198.51.100.1", TRUSTED, "198.51.100.1"),
        # A client's own X-Forwarded-For arrives left of what our proxy appended.
        ("10.1.1.1", "6.6.6.6, 198.51.100.1", TRUSTED, "198.51.100.1"),
        # Two proxies of ours: the rightmost hop that is not one of them.
        ("10.1.1.1", "6.6.6.6, 198.51.100.1, 10.2.2.2", TRUSTED, "198.51.100.1"),
        # Every hop ours: the nearest to the client.
        ("10.1.1.1", "10.3.3.3, 10.2.2.2", TRUSTED, "10.3.3.3"),
        # A hop that is not an address: the proxy that reported it.
        ("10.1.1.1", "6.6.6.6, garbage", TRUSTED, "10.1.1.1"),
        ("fd00::1", "2001:db8::7", TRUSTED, "2001:db8::7"),
        ("10.1.1.1", "", TRUSTED, "10.1.1.1"),
    ],
)
def test_the_client_is_the_rightmost_hop_not_a_trusted_proxy(
    remote_addr: str, forwarded_for: str, trusted: list[Any], client: str
) -> None:
    assert (
        forwarded_client(remote_addr=remote_addr, forwarded_for=forwarded_for, trusted=trusted)
        == client
    )


def test_the_admin_login_locks_after_ten_failures_without_checking_the_eleventh(
    alice: User, password_checks: list[str]
) -> None:
    alice.is_staff = True
    alice.save()
    client = Client()
    with time_machine.travel(START, tick=False) as clock:
        for attempt in range(10):
            response = _admin_login(client, "alice", f"wrong-{attempt}", ip="10.0.14.1")
            assert response.status_code == 200  # the form again, with its error
            assert "_auth_user_id" not in client.session
        assert len(password_checks) == 10
        refused = _admin_login(client, "alice", "the-right-password", ip="10.0.14.1")
        assert "Too many failed sign-ins" in refused.content.decode()
        assert "_auth_user_id" not in client.session
        assert len(password_checks) == 10

        clock.move_to(START + timedelta(seconds=61))
        signed_in = _admin_login(client, "alice", "the-right-password", ip="10.0.14.1")
        assert signed_in.status_code == 302
        assert client.session["_auth_user_id"] == str(alice.pk)


def test_the_admin_login_and_the_panel_login_share_one_count(alice: User) -> None:
    client = Client()
    with time_machine.travel(START, tick=False):
        for attempt in range(5):
            _admin_login(client, f"name{attempt}", "wrong", ip="10.0.15.1")
            _login(client, f"other{attempt}", "wrong", ip="10.0.15.1")
        assert _login(client, "alice", "the-right-password", ip="10.0.15.1").status_code == 429


def test_failures_in_a_victims_name_do_not_lock_out_their_valid_token(alice: User) -> None:
    victim = APIClient(REMOTE_ADDR="10.0.10.1")
    victim.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=alice)[1]}")
    attacker = APIClient(REMOTE_ADDR="10.0.11.1")
    with time_machine.travel(START, tick=False):
        for attempt in range(15):
            attacker.credentials(
                HTTP_AUTHORIZATION=f"Token wrong{attempt:059d}",
                HTTP_X_FORWARDED_FOR="10.0.10.1",  # the victim's address, claimed
            )
            attacker.get("/api/agents")
        assert victim.get("/api/agents").status_code == 200
        assert attacker.get("/api/agents").status_code == 429  # the guesser is held


def test_failures_in_a_victims_name_do_not_lock_out_their_panel_login(alice: User) -> None:
    with time_machine.travel(START, tick=False) as clock:
        assert _login(Client(), "alice", "the-right-password", ip="10.0.12.1").status_code == 200
        clock.shift(timedelta(seconds=5))
        # A guess at alice's password spread over many addresses, one claiming hers.
        for attempt in range(10):
            _login(
                Client(),
                "alice",
                f"wrong-{attempt}",
                ip=f"10.0.13.{attempt}",
                HTTP_X_FORWARDED_FOR="10.0.12.1",
            )
        # Still held for the guessers, wherever they come from next...
        assert _login(Client(), "alice", "a-guess", ip="10.0.13.99").status_code == 429
        # ...but alice, from the address she signs in from, is let in.
        signed_in = _login(Client(), "alice", "the-right-password", ip="10.0.12.1")
        assert signed_in.status_code == 200, signed_in.content


# Per address and per account: a shared address (agents and operators on 127.0.0.1;
# every client behind a proxy nobody named) is not one person.


def _user(username: str, password: str) -> User:
    user = UserFactory.create(username=username)
    user.set_password(password)
    user.save()
    return user


def test_one_accounts_failures_at_a_shared_address_lock_out_no_other_account_there(
    alice: User, password_checks: list[str]
) -> None:
    _user("bob", "bobs-password")
    shared = "127.0.0.1"
    with time_machine.travel(START, tick=False):
        for attempt in range(15):
            _login(Client(), "alice", f"wrong-{attempt}", ip=shared)
        assert len(password_checks) == 10  # alice's own count held her after ten
        # Bob has never signed in from here, and still does; a stranger's guess is checked.
        assert _login(Client(), "bob", "bobs-password", ip=shared).status_code == 200
        assert _login(Client(), "carol", "a-guess", ip=shared).status_code == 400
        # Alice, from there, is held: her failures are hers (and nothing tells her
        # apart from someone guessing her password from the same address).
        assert _login(Client(), "alice", "the-right-password", ip=shared).status_code == 429


def test_a_password_spray_from_one_address_is_held_for_every_account_new_to_it(
    alice: User, password_checks: list[str]
) -> None:
    _user("bob", "bobs-password")
    _user("carol", "carols-password")
    with time_machine.travel(START, tick=False) as clock:
        assert _login(Client(), "bob", "bobs-password", ip="10.0.20.1").status_code == 200
        clock.shift(timedelta(seconds=1))
        # One password over ten names, a failure each: the address's count holds it...
        for attempt in range(10):
            _login(Client(), f"name{attempt}", "Spring2026!", ip="10.0.20.1")
        checked = len(password_checks)
        assert _login(Client(), "carol", "carols-password", ip="10.0.20.1").status_code == 429
        assert _login(Client(), "name99", "Spring2026!", ip="10.0.20.1").status_code == 429
        assert len(password_checks) == checked  # refused unchecked
        # ...while whoever signs in from there already is not locked out by it.
        assert _login(Client(), "bob", "bobs-password", ip="10.0.20.1").status_code == 200
        # A minute after the spray, the address is open again.
        clock.move_to(START + timedelta(seconds=62))
        assert _login(Client(), "carol", "carols-password", ip="10.0.20.1").status_code == 200


def test_a_guesser_at_the_account_holders_own_address_is_held_there_only(alice: User) -> None:
    with time_machine.travel(START, tick=False):
        for ip in ("10.0.21.1", "10.0.21.2"):
            assert _login(Client(), "alice", "the-right-password", ip=ip).status_code == 200
        for attempt in range(10):
            _login(Client(), "alice", f"wrong-{attempt}", ip="10.0.21.1")
        assert _login(Client(), "alice", "the-right-password", ip="10.0.21.1").status_code == 429
        assert _login(Client(), "alice", "the-right-password", ip="10.0.21.2").status_code == 200


def test_wrong_tokens_from_a_shared_address_lock_out_no_token_already_used_there(
    alice: User, token_lookups: list[bytes]
) -> None:
    used = AuthToken.objects.create(user=alice)[1]
    fresh = AuthToken.objects.create(user=alice)[1]
    shared = "127.0.0.1"
    with time_machine.travel(START, tick=False) as clock:
        holder = APIClient(REMOTE_ADDR=shared)
        holder.credentials(HTTP_AUTHORIZATION=f"Token {used}")
        assert holder.get("/api/agents").status_code == 200
        clock.shift(timedelta(days=20))  # within 30 days of that use
        guesser = APIClient(REMOTE_ADDR=shared)
        for attempt in range(10):
            guesser.credentials(HTTP_AUTHORIZATION=f"Token wrong{attempt:059d}")
            assert guesser.get("/api/agents").status_code == 401
        assert guesser.get("/api/agents").status_code == 429
        assert holder.get("/api/agents").status_code == 200
        # A token never used from here is refused unchecked, like the guesser.
        lookups = len(token_lookups)
        newcomer = APIClient(REMOTE_ADDR=shared)
        newcomer.credentials(HTTP_AUTHORIZATION=f"Token {fresh}")
        assert newcomer.get("/api/agents").status_code == 429
        assert len(token_lookups) == lookups


@pytest.mark.parametrize(
    ("entries", "now", "distinct", "wait"),
    [
        # Nine failures: under the limit of ten.
        ([(100.0 - i, "") for i in range(9)], 100.0, False, None),
        # Ten: held until the tenth newest leaves the window (91 + 60 - 100).
        ([(100.0 - i, "") for i in range(10)], 100.0, False, 51.0),
        # The window's edge: a failure exactly a window old no longer counts.
        ([(100.0 - i, "") for i in range(9)] + [(40.0, "")], 100.0, False, None),
        # A wait under a second is a second.
        ([(100.0 - i, "") for i in range(10)], 150.5, False, 1.0),
        # Distinct: ten failures of one account are one.
        ([(100.0 - i, "a") for i in range(10)], 100.0, True, None),
        # Ten accounts: held until the tenth newest account's last failure leaves.
        ([(100.0 - i, f"u{i}") for i in range(10)], 100.0, True, 51.0),
        ([(100.0, "u0"), *[(99.0 - i, f"u{i}") for i in range(10)]], 100.0, True, 50.0),
    ],
)
def test_when_a_count_refuses(
    entries: list[tuple[float, str]], now: float, distinct: bool, wait: float | None
) -> None:
    from trinity.sign_in_throttle import recent, refusal_wait

    stored = [[when, whose] for when, whose in entries]
    kept = recent(stored, now=now)
    assert refusal_wait(kept, now=now, limit=10, distinct=distinct) == wait


def test_a_stored_history_this_module_did_not_write_is_no_history() -> None:
    from trinity.sign_in_throttle import recent

    assert recent([1.0, 2.0], now=3.0) == []  # another format
    assert recent({"a": 1}, now=3.0) == []
    assert recent([[2.0, "x"], ["3", "y"], [2.5, 7], [2.9]], now=3.0) == [(2.0, "x")]


# A proxy nobody named


@pytest.mark.parametrize(
    ("https", "trusted", "warned"),
    [
        (True, [], True),
        (True, [ipaddress.ip_network("10.0.0.0/8")], False),
        (False, [], False),
    ],
)
def test_a_tls_proxy_without_trusted_proxies_is_warned_about_at_startup(
    https: bool, trusted: list[Any], warned: bool
) -> None:
    from trinity.authentication import proxy_warning

    warning = proxy_warning(https=https, trusted=trusted)
    assert (warning is not None) == warned
    if warning:
        assert "TRINITY_TRUSTED_PROXIES is unset" in warning


def test_the_first_forwarded_request_without_trusted_proxies_is_warned_about_once(
    alice: User, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from trinity import authentication

    settings.TRINITY_TRUSTED_PROXIES = []
    authentication._forwarded_for_unread.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="trinity.authentication"):
            _login(Client(), "alice", "wrong", ip="10.0.23.1")  # no header: nothing to say
            assert not [r for r in caplog.records if "X-Forwarded-For" in r.getMessage()]
            for hop in ("198.51.100.1", "198.51.100.2"):
                _login(Client(), "alice", "wrong", ip="10.0.23.1", HTTP_X_FORWARDED_FOR=hop)
        said = [r for r in caplog.records if "X-Forwarded-For" in r.getMessage()]
        assert len(said) == 1
        assert "TRINITY_TRUSTED_PROXIES is unset" in said[0].getMessage()
    finally:
        authentication._forwarded_for_unread.cache_clear()
