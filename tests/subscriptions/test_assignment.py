"""Every assignment change compares and sets; two credential applications for one
agent recreate it once."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection

from agents import lifecycle
from agents.models import Agent, AuthMode
from simulator.control import SimulatorControl
from subscriptions import services
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory, plan_token
from trinity import services as trinity_services
from trinity.errors import Conflict


@pytest.mark.django_db
def test_an_assignment_over_a_concurrent_change_is_refused_and_writes_nothing() -> None:
    a, b, c = SubscriptionFactory.create_batch(3)
    agent = AgentFactory.create(subscription=a)
    stale = Agent.objects.get(pk=agent.pk)
    Agent.objects.filter(pk=agent.pk).update(subscription=b)  # a walk committed meanwhile
    with pytest.raises(Conflict):
        services.assignment_set(agent=stale, subscription_id=c.pk)
    with pytest.raises(Conflict):
        services.assignment_clear(agent=stale)
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk


@pytest.mark.django_db
def test_an_assignment_from_a_fresh_read_goes_through() -> None:
    a, b = SubscriptionFactory.create_batch(2)
    agent = AgentFactory.create(subscription=a)
    services.assignment_set(agent=agent, subscription_id=b.pk)
    services.assignment_clear(agent=Agent.objects.get(pk=agent.pk))
    agent.refresh_from_db()
    assert agent.subscription_id is None


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_two_credential_applications_recreate_the_agent_once(
    control: SimulatorControl, owner: User
) -> None:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-a")
    subscription, _ = services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=token
    )
    trinity_services.platform_api_key_set(key="sk-ant-api03-" + "k" * 40)
    agent = AgentFactory.create(name="bot", owner=owner, subscription=subscription)
    agent = lifecycle.agent_start(agent=agent)
    assert agent.auth_mode == AuthMode.SUBSCRIPTION
    # The mode changes (plan -> platform key) and two tasks race to apply it.
    Agent.objects.filter(pk=agent.pk).update(subscription=None)
    barrier = threading.Barrier(2)
    results: list[str] = []

    def apply() -> None:
        try:
            barrier.wait(10)
            results.append(lifecycle.agent_apply_credentials(agent=agent))
        finally:
            connection.close()

    threads = [threading.Thread(target=apply) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(results) == ["recreated", "unchanged"]
    agent.refresh_from_db()
    assert agent.auth_mode == AuthMode.API_KEY and agent.endpoint
