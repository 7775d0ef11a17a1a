"""The provider circuit breaker: its state machine as tables (thresholds, window and
cooldown edges), and its Redis store shared by every process (open once, half-open
single trial, an unreachable store reads closed)."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.synchronize
import os
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings

from subscriptions import breaker
from subscriptions.breaker import (
    TRIAL_HOLD_MAX_SECONDS,
    BreakerRules,
    BreakerState,
    Failure,
    breaker_failure_record,
    breaker_read,
    breaker_state,
    breaker_trial_claim,
    breaker_trial_end,
    breaker_turn_gate,
    failures_state,
    is_provider_failure,
    opens_on_failure,
)

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
RULES = BreakerRules()  # 60 s window, 3 degraded, 5 open, 2 credentials, 30 s cooldown
ON_REDIS = bool(os.environ.get("REDIS_URL"))
UNREACHABLE_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:9/0",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
    }
}
S = timedelta(seconds=1)


def failures(*spec: tuple[float, str]) -> list[Failure]:
    """Failures ``seconds`` before T0 on a credential."""
    return [Failure(T0 - seconds * S, credential) for seconds, credential in spec]


@pytest.mark.parametrize(
    ("error_code", "counts"),
    [
        ("upstream_error", True),
        ("timeout", True),
        ("rate_limit", False),  # a 429: the provider answered; the account is spent
        ("auth", False),  # a 401 or billing: the credential's problem
        ("model_unsupported", False),
        ("container_fault", False),
        ("runtime_killed", False),
        ("", False),
    ],
)
def test_only_provider_failures_count(error_code: str, counts: bool) -> None:
    assert is_provider_failure(error_code) is counts


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ((), BreakerState.CLOSED),
        (((1, "a"), (2, "b")), BreakerState.CLOSED),  # 2 failures: below 3
        (((1, "a"), (2, "b"), (3, "a")), BreakerState.DEGRADED),  # exactly 3
        (((1, "a"), (2, "b"), (3, "a"), (4, "b")), BreakerState.DEGRADED),  # 4
        (((1, "a"), (2, "b"), (3, "a"), (4, "b"), (5, "a")), BreakerState.OPEN),  # exactly 5
        # One credential failing alone is that credential's problem, however often.
        (tuple((i, "a") for i in range(10)), BreakerState.CLOSED),
        # Exactly the window old is out of it; a microsecond younger is in.
        (((60, "a"), (1, "b"), (2, "a")), BreakerState.CLOSED),
        (((59.999999, "a"), (1, "b"), (2, "a")), BreakerState.DEGRADED),
        # Five in the window but only one credential inside it: closed.
        (((61, "b"), (1, "a"), (2, "a"), (3, "a"), (4, "a"), (5, "a")), BreakerState.CLOSED),
        # A failure stamped after now (another process's clock ahead) counts.
        (((-1, "a"), (1, "b"), (2, "a")), BreakerState.DEGRADED),
        (((0, "a"), (1, "b"), (2, "a")), BreakerState.DEGRADED),  # at now: counted
    ],
)
def test_failures_in_the_window_across_credentials_set_the_state(
    spec: tuple[tuple[float, str], ...], expected: BreakerState
) -> None:
    assert failures_state(failures(*spec), now=T0, rules=RULES) is expected


@pytest.mark.parametrize(
    ("opened_ago", "expected"),
    [
        (0, BreakerState.OPEN),
        (29.999999, BreakerState.OPEN),
        (30, BreakerState.HALF_OPEN),  # the cooldown's end is already half-open
        (3600, BreakerState.HALF_OPEN),  # stays half-open until a trial decides
    ],
)
def test_an_opened_breaker_is_open_for_the_cooldown_then_half_open(
    opened_ago: float, expected: BreakerState
) -> None:
    # No failures in the window (nothing is sent while it is open): still open.
    state = breaker_state(failures=[], opened_at=T0 - opened_ago * S, now=T0, rules=RULES)
    assert state is expected


@pytest.mark.parametrize(
    ("before", "after", "opens"),
    [
        (BreakerState.CLOSED, BreakerState.CLOSED, False),
        (BreakerState.CLOSED, BreakerState.DEGRADED, False),
        (BreakerState.DEGRADED, BreakerState.OPEN, True),
        (BreakerState.CLOSED, BreakerState.OPEN, True),
        (BreakerState.OPEN, BreakerState.OPEN, False),  # a late failure: no new cooldown
        (BreakerState.HALF_OPEN, BreakerState.HALF_OPEN, True),  # the trial failed
    ],
)
def test_what_a_new_failure_opens(before: BreakerState, after: BreakerState, opens: bool) -> None:
    assert opens_on_failure(before, after) is opens


# The store

needs_redis = pytest.mark.skipif(not ON_REDIS, reason="needs a real Redis: set REDIS_URL")


def record(credential: str, at: datetime) -> tuple[BreakerState, bool]:
    return breaker_failure_record(provider="anthropic", credential=credential, now=at, rules=RULES)


@pytest.mark.redis
@needs_redis
def test_the_fifth_failure_across_two_credentials_opens_it_once() -> None:
    states = [record("a" if i % 2 else "b", T0 + i * S) for i in range(7)]

    assert states == [
        (BreakerState.CLOSED, False),
        (BreakerState.CLOSED, False),
        (BreakerState.DEGRADED, False),
        (BreakerState.DEGRADED, False),
        (BreakerState.OPEN, True),  # the opener, the only one told it opened
        (BreakerState.OPEN, False),
        (BreakerState.OPEN, False),
    ]
    view = breaker_read(provider="anthropic", now=T0 + 6 * S, rules=RULES)
    assert (view.state, view.opened_at) == (BreakerState.OPEN, T0 + 4 * S)
    # Another provider's breaker is its own.
    other = breaker_read(provider="openai-codex", now=T0 + 6 * S, rules=RULES)
    assert other.state is BreakerState.CLOSED


@pytest.mark.redis
@needs_redis
def test_half_open_lets_one_trial_through_and_its_success_closes_it() -> None:
    for i in range(5):
        record("a" if i % 2 else "b", T0 + i * S)
    half_open = T0 + 4 * S + RULES.cooldown
    assert breaker_read(provider="anthropic", now=half_open, rules=RULES).state is (
        BreakerState.HALF_OPEN
    )

    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)
    assert not breaker_trial_claim(provider="anthropic", ttl_seconds=60)  # one at a time
    breaker_trial_end(provider="anthropic", provider_failed=False)

    view = breaker_read(provider="anthropic", now=half_open, rules=RULES)
    assert (view.state, view.opened_at, view.failures) == (BreakerState.CLOSED, None, 0)
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)  # the trial is free


@pytest.mark.redis
@needs_redis
def test_a_failed_trial_reopens_it_for_another_cooldown() -> None:
    for i in range(5):
        record("a" if i % 2 else "b", T0 + i * S)
    half_open = T0 + 4 * S + RULES.cooldown
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)

    assert record("a", half_open) == (BreakerState.OPEN, True)
    breaker_trial_end(provider="anthropic", provider_failed=True)

    view = breaker_read(provider="anthropic", now=half_open + RULES.cooldown - S, rules=RULES)
    assert (view.state, view.opened_at) == (BreakerState.OPEN, half_open)
    # A trial that said nothing of the provider (a container fault) only frees the door.
    later = half_open + RULES.cooldown
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)
    breaker_trial_end(provider="anthropic", provider_failed=None)
    assert breaker_read(provider="anthropic", now=later, rules=RULES).state is (
        BreakerState.HALF_OPEN
    )
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)


@pytest.mark.redis
@needs_redis
def test_failures_older_than_the_window_are_forgotten_by_the_store() -> None:
    for i in range(4):
        record("a" if i % 2 else "b", T0 + i * S)
    # The fifth comes a minute after the first two: only three are in its window.
    assert record("a", T0 + 61 * S) == (BreakerState.DEGRADED, False)


@pytest.mark.django_db
def test_an_unreachable_store_reads_closed_and_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(breaker._outage, "logged", False)
    with override_settings(CACHES=UNREACHABLE_REDIS), caplog.at_level(logging.WARNING):
        view = breaker_read(provider="anthropic", now=T0, rules=RULES)
        assert (view.state, view.reachable) == (BreakerState.CLOSED, False)
        assert record("a", T0) == (BreakerState.CLOSED, False)
        assert breaker_trial_claim(provider="anthropic", ttl_seconds=60)  # never blocks
        assert breaker_turn_gate(provider="anthropic", now=T0, trial_seconds=60) == (True, False)
        breaker_read(provider="anthropic", now=T0, rules=RULES)
    warnings = [r for r in caplog.records if "breaker store unreachable" in r.getMessage()]
    assert len(warnings) == 1


PROCESSES = 6


def _fail_once(process: int, barrier: multiprocessing.synchronize.Barrier, results: object) -> None:
    """One process (its own Redis connection after the fork) counting one failure."""
    barrier.wait()
    state, opened = record(f"subscription:{process % 2}", T0 + process * timedelta(microseconds=1))
    results.put((state.value, opened))  # type: ignore[attr-defined]


@pytest.mark.redis
@needs_redis
def test_processes_failing_at_once_share_one_breaker_and_one_opener() -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=_fail_once, args=(n, barrier, results)) for n in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0

    # Six failures over two credentials from six processes: open, and told once.
    assert sum(opened for _, opened in outcomes) == 1
    assert breaker_read(provider="anthropic", now=T0 + S, rules=RULES).state is BreakerState.OPEN


@pytest.mark.redis
@needs_redis
def test_the_turn_gate_admits_closed_and_degraded_refuses_open_and_sends_one_trial() -> None:
    def gate(at: datetime) -> tuple[bool, bool]:
        return breaker_turn_gate(provider="anthropic", now=at, trial_seconds=60)

    assert gate(T0) == (True, False)  # closed
    for i in range(3):
        record("a" if i % 2 else "b", T0 + i * S)
    assert gate(T0 + 3 * S) == (True, False)  # degraded: turns still go
    for i in range(3, 5):
        record("a" if i % 2 else "b", T0 + i * S)
    assert gate(T0 + 5 * S) == (False, False)  # open: fail fast
    half_open = T0 + 4 * S + timedelta(seconds=30)
    assert gate(half_open) == (True, True)  # the trial
    assert gate(half_open) == (False, False)  # everyone else waits for its verdict


@pytest.mark.redis
@needs_redis
def test_a_trial_ends_only_its_own_claim() -> None:
    # t1's claim lapsed under a long trial and t2 holds the door now: t1 ending must
    # not let a third trial in.
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60, holder="t2")
    breaker_trial_end(provider="anthropic", provider_failed=None, holder="t1")
    assert not breaker_trial_claim(provider="anthropic", ttl_seconds=60, holder="t3")
    breaker_trial_end(provider="anthropic", provider_failed=None, holder="t2")
    assert breaker_trial_claim(provider="anthropic", ttl_seconds=60, holder="t3")


@pytest.mark.redis
@needs_redis
def test_a_trial_holds_the_door_at_most_two_minutes() -> None:
    for i in range(5):
        record("a" if i % 2 else "b", T0 + i * S)
    half_open = T0 + 4 * S + timedelta(seconds=30)
    assert breaker_turn_gate(provider="anthropic", now=half_open, trial_seconds=780) == (
        True,
        True,
    )
    ttl = cache.ttl("marker:breaker-trial:anthropic")  # type: ignore[attr-defined]
    assert 110 <= ttl <= TRIAL_HOLD_MAX_SECONDS == 120
