"""The upstream answers 5xx for every credential (a provider outage).

Real parts: the agent server with the real Claude Code CLI, the simulator answering
500 to every Messages request (``/_control/upstream-error``), the test database.
The simulator says ``x-should-retry: false``, so the CLI reports the first 5xx at
once: the platform's own retry is what is under test (with ``true`` the CLI retries
ten times over minutes by itself, inside the same turn budget).
"""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.faults.harness import (
    agent_on,
    messages_sent,
    register_plan,
    task,
    turn_in_background,
    wait_until,
)
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_simulator_answers_the_outage_to_every_credential_until_lifted(
    control: SimulatorControl,
) -> None:
    assert control.set_upstream_error(529, retryable=False) == {"status": 529, "retryable": False}
    with pytest.raises(httpx.HTTPStatusError):
        control.set_upstream_error(418)
    assert control.set_upstream_error(0) == {"status": 0, "retryable": True}
    control.set_upstream_error(500)
    control.reset()
    assert control.set_upstream_error(0)["status"] == 0


def test_a_5xx_for_every_credential_blames_no_one_and_fails_upstream_error_after_one_retry(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    trinity_services.platform_api_key_set(key="sk-ant-api03-" + "k" * 64)
    control.set_upstream_error(500, retryable=False)

    body = task(owner_client)

    assert body["http_status"] == 502, body
    assert body["error_code"] == "upstream_error"
    # The same rung once more, then the honest failure: no walk to plan-b or the key.
    assert messages_sent(control) == [("plan-a", 500), ("plan-a", 500)]
    assert [(x["name"], x["why"], x["error_code"]) for x in body["attempts"]] == [
        ("plan-a", "assigned", "upstream_error"),
        ("plan-a", "retry", "upstream_error"),
    ]
    assert not RateLimitEvent.objects.exists()  # nothing skip-listed or blamed
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk and not agent.last_switch
    assert not Notification.objects.filter(
        kind__in=["subscription_switched", "pool_exhausted", "api_key_route"]
    ).exists()


def test_a_passing_5xx_is_served_by_the_retry_on_the_same_plan(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200  # the server is up
    control.clear_requests()
    control.set_latency(1_500)  # room to lift the outage between the attempts
    control.set_upstream_error(500, retryable=False)

    thread, body = turn_in_background(owner_client)
    wait_until(lambda: messages_sent(control), seconds=60, what="the first attempt's 5xx")
    control.set_upstream_error(0)
    thread.join(timeout=120)
    control.set_latency(0)

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}
    assert messages_sent(control) == [("plan-a", 500), ("plan-a", 200)]
    assert [(x["why"], x["outcome"]) for x in body["attempts"]] == [
        ("assigned", "refused"),
        ("retry", "served"),
    ]
    assert body["subscription_switch"] is None
    assert not RateLimitEvent.objects.exists()


def test_no_retry_once_the_budget_is_below_the_reissue_floor(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    agent_on(owner, a)
    control.set_upstream_error(500, retryable=False)

    # 35 s is exactly the re-issue floor (30 s + 5 s slack): once the 5xx is back,
    # less than that is left, however fast it came.
    body = task(owner_client, timeout_seconds=35)

    assert body["http_status"] == 502 and body["error_code"] == "upstream_error", body
    assert messages_sent(control) == [("plan-a", 500)]
