"""Turns on a Claude plan signed in from the panel: its access token refreshed before a
turn sends it, and a dead sign-in walking the turn with one notice.

Real processes: the simulator (its sign-in page and token endpoint, its Messages API
refusing an expired access token), an agent server running the real Claude Code CLI,
PostgreSQL and Redis. The plan is signed in through the REST API as the panel does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions.models import Subscription
from tests.execution.support import agent_on, messages_sent, register_plan, task
from tests.subscriptions.test_claude_refresh import stored_columns
from tests.subscriptions.test_plan_sign_in import paste, shown_code, start
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _signed_in(client: APIClient, name: str = "claude-signed") -> Subscription:
    flow = start(client, name=name).json()
    answer = paste(client, flow["flow"], shown_code(flow["authorize_url"]))
    assert answer.status_code == 201, answer.json()
    return Subscription.objects.get(name=name)


def _expiring(control: SimulatorControl, plan: Subscription) -> str:
    """The plan's access token expires now at the provider, and the platform's stored
    expiry says it is about to (in the middle of the plan's week); returns it."""
    assert plan.token is not None
    token = plan.token.reveal()
    control.expire_access(token)
    Subscription.objects.filter(pk=plan.pk).update(
        token_expires_at=datetime.now(UTC) + timedelta(minutes=2)
    )
    return token


def test_a_turn_refreshes_an_expiring_access_token_once_before_sending_it(
    control: SimulatorControl,
    admin_client_api: APIClient,
    owner: User,
    owner_client: APIClient,
) -> None:
    plan = _signed_in(admin_client_api)
    agent_on(owner, plan)
    old = _expiring(control, plan)
    control.clear_requests()

    body = task(owner_client, message="say hi")

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"]["name"] == "claude-signed"
    plan.refresh_from_db()
    assert plan.token is not None and plan.token.reveal() != old
    assert body["attempts"][0]["fingerprint"] == plan.token.reveal()[-4:]
    assert messages_sent(control) == [("claude-sign-in-1", 200)]
    assert control.credential("claude-sign-in-1")["refreshes"] == 1
    # The next turn finds the rotated token holding: no second refresh.
    assert task(owner_client, message="again")["http_status"] == 200
    assert control.oauth()["refreshes"] == 1


def test_a_dead_sign_in_walks_the_turn_keeps_its_tokens_and_tells_once(
    control: SimulatorControl,
    admin_client_api: APIClient,
    owner: User,
    owner_client: APIClient,
) -> None:
    plan = _signed_in(admin_client_api)
    register_plan(control, "plan-b")
    agent_on(owner, plan)
    _expiring(control, plan)
    assert plan.refresh_token is not None
    control.revoke_refresh(plan.refresh_token.reveal())
    before = stored_columns(plan)
    control.clear_requests()

    body = task(owner_client, message="say hi")

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"]["name"] == "plan-b"
    # The expired token was sent (the provider's 401 walked it), then plan-b served.
    sent = [
        (r["credential"], r["status"]) for r in control.requests() if r["path"] == "/v1/messages"
    ]
    assert ("claude-sign-in-1", 401) in sent
    assert sent[-1] == ("plan-b", 200)
    assert stored_columns(plan) == before  # byte for byte: nothing was written
    assert Notification.objects.filter(kind="claude_sign_in_dead").count() == 1
    assert task(owner_client, message="again")["http_status"] == 200
    assert Notification.objects.filter(kind="claude_sign_in_dead").count() == 1
    assert control.oauth()["refreshes"] == 0
