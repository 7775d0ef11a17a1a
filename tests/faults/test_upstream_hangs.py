"""The upstream hangs: it accepts the request and answers nothing for longer than the turn.

Real parts: the agent server with the real Claude Code CLI, the simulator holding every
answer for 60 s, the test database. The turn's own budget ends it; a timeout says
nothing about the credential, so it never walks to another plan or the key.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from execution.models import Execution
from routing.attempt_refusal import classify_attempt_refusal
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.faults.harness import agent_on, register_plan, task, wait_until
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HANG_MS = 60_000  # the simulator's longest latency
BUDGET = 40  # above the re-issue floor (35 s): only the classification stops a walk


def test_a_timeout_is_not_a_credential_refusal() -> None:
    refusal = classify_attempt_refusal(
        error_code="timeout", detail="the turn exceeded timeout_seconds=40; its process group"
    )
    assert (refusal.error_code, refusal.walks) == ("timeout", False)


def test_a_hanging_upstream_ends_the_turn_at_its_deadline_without_a_reissue(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    trinity_services.platform_api_key_set(key="sk-ant-api03-" + "h" * 64)
    agent = agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200  # the server is up
    control.clear_requests()
    control.set_latency(HANG_MS)

    sent = time.monotonic()
    body = task(owner_client, timeout_seconds=BUDGET)
    took = time.monotonic() - sent

    assert body["http_status"] == 504, body
    assert body["error_code"] == "timeout" and body["walk_stop"] == ""
    assert [(x["name"], x["error_code"]) for x in body["attempts"]] == [("plan-a", "timeout")]
    # Bounded by its own budget (plus the agent server's kill and the answer's way back).
    assert BUDGET - 1 <= took < BUDGET + 15
    execution = Execution.objects.get(pk=body["id"])
    assert execution.deadline is not None and execution.finished_at is not None
    assert execution.finished_at <= execution.deadline
    assert execution.finished_at - execution.created_at < timedelta(seconds=BUDGET + 15)
    assert not RateLimitEvent.objects.exists()
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk
    assert not Notification.objects.filter(kind__in=["subscription_switched", "api_key_route"])

    # Once every held answer is out, the upstream saw this turn on plan-a alone, at most
    # once: no re-issue on plan-a, none on plan-b, none on the key.
    control.set_latency(0)  # releases every held answer
    wait_until(
        lambda: control.latency()["in_flight"] == 0,
        seconds=30,
        what="the held answers to be answered and recorded",
    )
    seen = control.requests()
    assert {r["credential"] for r in seen} <= {"plan-a"}, seen
    assert len([r for r in seen if r["path"] == "/v1/messages"]) <= 1, seen
