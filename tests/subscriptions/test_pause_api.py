"""Pausing a plan: only an admin may (the pool is shared by every operator's agents),
through ``PATCH /api/subscriptions/{id}``; the answer says who paused it and when, and
every operator is told once. Real database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory
from trinity.models import Notification

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(owner: User) -> Subscription:
    subscription = SubscriptionFactory.create(name="plan-a")
    AgentFactory.create(name="bot", owner=owner, subscription=subscription)  # the owner's agent
    return subscription


def _pause(client: APIClient, plan: Subscription, paused: object = True) -> tuple[int, dict]:
    response = client.patch(f"/api/subscriptions/{plan.pk}", {"paused": paused}, format="json")
    return response.status_code, response.json()


def test_the_owner_of_an_agent_on_the_plan_may_not_pause_it(
    plan: Subscription, owner_client: APIClient
) -> None:
    status, _ = _pause(owner_client, plan)
    assert status == 403
    assert Subscription.objects.get(pk=plan.pk).paused_at is None


def test_another_operator_may_not_pause_it(plan: Subscription, other_client: APIClient) -> None:
    status, _ = _pause(other_client, plan)
    assert status == 403
    assert Subscription.objects.get(pk=plan.pk).paused_at is None


def test_an_admin_pauses_and_resumes_it_and_every_operator_is_told_once(
    plan: Subscription, admin_client_api: APIClient, admin_user: User, owner_client: APIClient
) -> None:
    status, body = _pause(admin_client_api, plan)
    assert status == 200, body
    assert body["paused_at"] is not None and body["paused_by"] == admin_user.username
    first = body["paused_at"]

    # Pausing a paused plan keeps its first pause and says nothing again.
    _, again = _pause(admin_client_api, plan)
    assert again["paused_at"] == first
    assert Notification.objects.filter(kind="subscription_paused").count() == 1
    # The operator sees the plan paused, and the notice (a pool notice).
    seen = owner_client.get(f"/api/subscriptions/{plan.pk}").json()
    assert (seen["paused_at"], seen["paused_by"]) == (first, admin_user.username)
    notices = owner_client.get("/api/notifications").json()["results"]
    assert [n["kind"] for n in notices] == ["subscription_paused"]

    status, resumed = _pause(admin_client_api, plan, paused=False)
    assert status == 200
    assert (resumed["paused_at"], resumed["paused_by"]) == (None, "")
    assert Notification.objects.filter(kind="subscription_resumed").count() == 1


@pytest.mark.parametrize("value", [None, "sometimes", ""])
def test_paused_must_be_a_boolean(
    plan: Subscription, admin_client_api: APIClient, value: object
) -> None:
    status, body = _pause(admin_client_api, plan, paused=value)
    assert status == 400, body
    assert Subscription.objects.get(pk=plan.pk).paused_at is None
