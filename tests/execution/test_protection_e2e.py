"""Protection end to end: the provider circuit breaker and the per-subscription
concurrency cap, with the REST API, real agent servers running the real Claude Code
CLI, the provider simulator, Postgres and Redis. What each turn sent upstream is read
from the simulator's request log."""

from __future__ import annotations

import logging
import os
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from agents.client import AgentServerClient
from execution.models import Execution
from simulator.control import SimulatorControl
from subscriptions import breaker, leases
from subscriptions.breaker import BreakerState, breaker_read
from subscriptions.leases import lease_acquire, leases_live
from subscriptions.models import RateLimitEvent, Subscription
from tests.execution.support import (
    agent_on,
    messages_sent,
    register_plan,
    task,
    turn_in_background,
    wait_until,
)
from tests.faults.harness import redis_cache
from tests.operations.services import throwaway_redis
from trinity import clock
from trinity.models import Notification

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
    # Leases and the breaker live in Redis; without it they enforce nothing by design.
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs a real Redis: set REDIS_URL"),
]


def test_a_second_concurrent_turn_runs_on_another_plan_when_the_first_fills_the_cap(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    Subscription.objects.filter(pk=a.pk).update(max_concurrency=1)
    agent = agent_on(owner, Subscription.objects.get(pk=a.pk))
    assert task(owner_client)["http_status"] == 200  # the agent server is up
    assert leases_live([a.pk], now=clock.now()) == {a.pk: 0}  # given back after serving
    control.clear_requests()
    control.set_latency(3_000)  # the first turn holds plan-a's only slot meanwhile

    thread, first = turn_in_background(owner_client)
    wait_until(
        lambda: leases_live([a.pk], now=clock.now()) == {a.pk: 1},
        seconds=30,
        what="the first turn's lease on plan-a",
    )
    second = task(owner_client)
    thread.join(timeout=120)
    control.set_latency(0)

    assert first["http_status"] == 200, first
    assert first["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}
    assert second["http_status"] == 200, second
    assert second["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    assert [(x["name"], x["why"]) for x in second["attempts"]] == [("plan-b", "at_capacity")]
    assert sorted(messages_sent(control)) == [("plan-a", 200), ("plan-b", 200)]
    # A busy plan is not a failing one: nothing is blamed and the assignment stays.
    assert second["subscription_switch"] is None
    assert not RateLimitEvent.objects.exists()
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk
    assert leases_live([a.pk, b.pk], now=clock.now()) == {a.pk: 0, b.pk: 0}


def test_a_turn_fails_clearly_when_its_plan_is_at_its_cap_and_nothing_else_may_serve(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    Subscription.objects.filter(pk=a.pk).update(max_concurrency=1)
    agent_on(owner, Subscription.objects.get(pk=a.pk))
    assert task(owner_client)["http_status"] == 200
    control.clear_requests()
    control.set_latency(3_000)

    thread, first = turn_in_background(owner_client)
    wait_until(
        lambda: leases_live([a.pk], now=clock.now()) == {a.pk: 1},
        seconds=30,
        what="the first turn's lease on plan-a",
    )
    second = task(owner_client)
    thread.join(timeout=120)
    control.set_latency(0)

    assert first["http_status"] == 200, first
    assert second["http_status"] == 429, second
    assert (second["error_code"], second["walk_stop"], second["retryable"]) == (
        "billing",
        "at_capacity",
        True,
    )
    assert "concurrency cap" in second["error_detail"]
    assert second["attempts"] == []
    assert messages_sent(control) == [("plan-a", 200)]  # the second was never sent


def test_repeated_5xx_across_two_plans_open_the_breaker_and_the_next_turn_fails_fast(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent_on(owner, a, name="bot")
    agent_on(owner, b, name="bot2")
    for name in ("bot", "bot2"):
        assert task(owner_client, agent=name)["http_status"] == 200  # both servers up
    control.clear_requests()
    control.set_upstream_error(500, retryable=False)

    with time_machine.travel(clock.now(), tick=True) as traveller:
        one = task(owner_client, agent="bot")  # a 5xx and its retry: one credential
        two = task(owner_client, agent="bot2")  # two more on plan-b: degraded
        assert breaker_read(provider="anthropic", now=clock.now()).state is (BreakerState.DEGRADED)
        three = task(owner_client, agent="bot")  # the fifth failure opens it: no retry
        assert breaker_read(provider="anthropic", now=clock.now()).state is BreakerState.OPEN
        sent_before = len(messages_sent(control))
        fast = task(owner_client, agent="bot2")

        assert [x["http_status"] for x in (one, two)] == [502, 502]
        assert [len(x["attempts"]) for x in (one, two, three)] == [2, 2, 1]
        for failed in (three, fast):
            assert failed["http_status"] == 503, failed
            assert (failed["error_code"], failed["walk_stop"], failed["retryable"]) == (
                "upstream_error",
                "provider_outage",
                True,
            )
            assert "provider outage" in failed["error_detail"]
        assert fast["attempts"] == []
        assert len(messages_sent(control)) == sent_before  # failed fast: nothing sent
        assert Notification.objects.filter(kind="provider_outage").count() == 1
        assert not RateLimitEvent.objects.exists()  # no plan blamed for the outage

        # The outage lifts; after the cooldown one trial turn closes the breaker.
        control.set_upstream_error(0)
        traveller.shift(timedelta(seconds=31))
        assert breaker_read(provider="anthropic", now=clock.now()).state is (BreakerState.HALF_OPEN)
        trial = task(owner_client, agent="bot")
        assert trial["http_status"] == 200, trial
        assert breaker_read(provider="anthropic", now=clock.now()).state is BreakerState.CLOSED
        assert task(owner_client, agent="bot2")["http_status"] == 200
    assert messages_sent(control)[-2:] == [("plan-a", 200), ("plan-b", 200)]
    assert Execution.objects.filter(walk_stop="provider_outage").count() == 2


@override_settings(TRINITY_BREAKER_OPEN_FAILURES=3, TRINITY_BREAKER_DEGRADED_FAILURES=2)
def test_a_failed_trial_reopens_the_breaker(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    agent_on(owner, a, name="bot")
    agent_on(owner, b, name="bot2")
    for name in ("bot", "bot2"):
        assert task(owner_client, agent=name)["http_status"] == 200
    control.set_upstream_error(500, retryable=False)

    with time_machine.travel(clock.now(), tick=True) as traveller:
        task(owner_client, agent="bot")
        task(owner_client, agent="bot2")  # the third failure, on a second plan: open
        assert breaker_read(provider="anthropic", now=clock.now()).state is BreakerState.OPEN
        traveller.shift(timedelta(seconds=31))
        control.clear_requests()

        trial = task(owner_client, agent="bot")

        assert trial["http_status"] == 503 and trial["walk_stop"] == "provider_outage", trial
        assert messages_sent(control) == [("plan-a", 500)]  # one trial, no retry
        view = breaker_read(provider="anthropic", now=clock.now())
        assert view.state is BreakerState.OPEN


def test_with_redis_down_a_capped_plan_serves_and_the_breaker_blocks_nothing(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(breaker._outage, "logged", False)
    monkeypatch.setattr(leases._outage, "logged", False)
    a, _ = register_plan(control, "plan-a")
    Subscription.objects.filter(pk=a.pk).update(max_concurrency=1)
    agent_on(owner, Subscription.objects.get(pk=a.pk))
    with throwaway_redis() as server, redis_cache(server.url):
        assert task(owner_client)["http_status"] == 200  # the server is up
        control.clear_requests()
        server.stop()
        with caplog.at_level(logging.WARNING):
            body = task(owner_client)

    # Fails safe: the breaker reads closed, the cap is not enforced, the turn is served.
    assert body["http_status"] == 200, body
    assert body["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}
    assert messages_sent(control) == [("plan-a", 200)]
    logged = [r.getMessage() for r in caplog.records]
    assert any("breaker store unreachable" in m for m in logged)
    assert any("lease store unreachable" in m for m in logged)


def test_a_walk_skips_a_plan_serving_its_cap_held_by_another_process(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")  # first in the walk's order, but busy
    c, _ = register_plan(control, "plan-c")
    Subscription.objects.filter(pk=b.pk).update(max_concurrency=1)
    agent_on(owner, a)
    now = clock.now()
    # Another worker's turn holds plan-b's only slot.
    assert lease_acquire(
        subscription_id=b.pk,
        holder="another-turn",
        cap=1,
        expires_at=now + timedelta(minutes=10),
        now=now,
    )
    control.set_usage(a_token, "five_hour", percent=100)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"] == {"id": c.pk, "name": "plan-c"}
    assert messages_sent(control) == [("plan-a", 429), ("plan-c", 200)]
    assert leases_live([b.pk], now=clock.now()) == {b.pk: 1}  # the other turn's, untouched


def test_a_capped_plans_lease_is_given_back_when_it_refuses_and_when_the_loop_breaks(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, a_token = register_plan(control, "plan-a")
    b, _ = register_plan(control, "plan-b")
    Subscription.objects.filter(pk__in=[a.pk, b.pk]).update(max_concurrency=1)
    agent_on(owner, Subscription.objects.get(pk=a.pk))
    control.set_usage(a_token, "five_hour", percent=100)

    walked = task(owner_client)  # plan-a refuses, plan-b serves

    assert walked["http_status"] == 200, walked
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 200)]
    assert leases_live([a.pk, b.pk], now=clock.now()) == {a.pk: 0, b.pk: 0}

    # A bug inside the loop while an attempt holds its lease: the turn fails and the
    # slot comes back (not only at the lease's deadline).
    taken: list[int] = []

    def broken(self: AgentServerClient, **kwargs: object) -> None:
        taken.append(leases_live([b.pk], now=clock.now())[b.pk])  # type: ignore[index]
        raise RuntimeError("a bug in the platform")

    monkeypatch.setattr(AgentServerClient, "run_turn", broken)
    failed = task(owner_client)

    assert failed["error_code"] == "container_fault", failed
    assert taken == [1]  # held while the attempt ran
    assert leases_live([a.pk, b.pk], now=clock.now()) == {a.pk: 0, b.pk: 0}
