"""A key budget under concurrent turns, end to end: the REST API, a real agent server
running the real Claude Code CLI, the provider simulator and the real database. With
every plan refusing, concurrent key turns stop at the budget (overspent by at most one
turn's cost), then the key rung is closed and turns fail with the budget's reason;
what reached the key is read from the simulator's request log."""

from __future__ import annotations

import uuid
from decimal import ROUND_UP, Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from execution.models import Execution, Status
from simulator.control import SimulatorControl
from subscriptions.key_spend import agent_scope
from subscriptions.models import KeySpend
from tests.execution.support import agent_on, messages_sent, register_plan, task, turn_in_background
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CONCURRENT = 5


def key_requests(control: SimulatorControl) -> list[int]:
    """The status of every turn request the simulator saw on the platform key."""
    return [status for credential, status in messages_sent(control) if credential == "platform-key"]


def test_concurrent_key_turns_stop_at_the_budget_then_the_key_rung_is_closed(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    plan, plan_token = register_plan(control, "plan-a")
    agent = agent_on(owner, plan)
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key)
    control.set_usage(plan_token, "five_hour", percent=100)  # every plan refuses

    # One key turn measures what a turn costs (and seeds the agent's estimate).
    first = task(owner_client)
    assert first["http_status"] == 200 and first["served_by_kind"] == "api_key", first
    cost = Decimal(first["cost_usd"])
    assert cost > 0
    # A budget (whole cents) with room for about two and a half more such turns.
    budget = (cost * Decimal("3.5")).quantize(Decimal("0.01"), rounding=ROUND_UP)
    agent.key_budget_daily_usd = budget
    agent.save(update_fields=["key_budget_daily_usd"])

    turns = [turn_in_background(owner_client) for _ in range(CONCURRENT)]
    for thread, _ in turns:
        thread.join(timeout=300)
    bodies = [result for _, result in turns]

    served = [b for b in bodies if b.get("http_status") == 200]
    stopped = [b for b in bodies if b.get("http_status") != 200]
    assert served and stopped, bodies
    assert all(b["served_by_kind"] == "api_key" for b in served)
    for body in stopped:
        assert (body["http_status"], body["error_code"], body["walk_stop"]) == (
            429,
            "billing",
            "key_budget",
        ), body
        assert f"daily budget of ${budget:.2f} for agent 'bot'" in body["error_detail"], body
    day = KeySpend.objects.get(scope=agent_scope(agent.pk), period="day")
    spent = Execution.objects.filter(status=Status.SUCCEEDED).values_list("cost_usd", flat=True)
    assert day.spent_usd == sum((c for c in spent if c is not None), Decimal("0"))
    assert day.reserved_usd == 0  # every reservation was settled
    largest = max(c for c in spent if c is not None)
    assert day.spent_usd <= budget + largest  # overspent by at most one turn's cost
    # Only the admitted turns reached the key: the refused ones were never sent there.
    assert key_requests(control) == [200] * (1 + len(served))

    # Closed now: the next turn is refused with the reason and never reaches the key.
    control.clear_requests()
    closed = task(owner_client)
    assert (closed["http_status"], closed["walk_stop"]) == (429, "key_budget"), closed
    assert closed["error_detail"].startswith("Tried: plan-a (rate limit)"), closed
    assert (
        f"the platform key's daily budget of ${budget:.2f} for agent 'bot'"
        in (closed["error_detail"])
    )
    assert closed["resets_at"] is not None
    assert key_requests(control) == []
    assert Notification.objects.filter(kind="key_budget_closed").count() == 1
