"""A served turn's answer names the subscription that served it without loading it again
when it is already in memory (the agent's own, loaded with the agent): one query less on
the turn path, whose budget is 2 ms (bench/turn_overhead.py measures it)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from rest_framework import serializers

from agents import lifecycle
from agents.client import TurnOutcome
from agents.selectors import agent_get_visible
from execution import services
from execution.api import ExecutionOutput
from execution.models import Execution, Status
from execution.served import served
from execution.turn_state import turn_state_start
from routing.planner import AgentFacts, Finish
from routing.walk import Why
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory

pytestmark = pytest.mark.django_db


def _served_by(execution: Execution, subscription_id: int) -> Execution:
    execution.status = Status.SUCCEEDED
    execution.served_by_kind = "subscription"
    execution.served_by_subscription_id = subscription_id
    execution.save()
    return execution


def test_it_names_the_agents_own_subscription_without_a_query(
    owner: User, django_assert_num_queries: Any
) -> None:
    plan = SubscriptionFactory.create(name="plan-own")
    AgentFactory.create(name="busy", owner=owner, subscription=plan)
    agent = agent_get_visible(user=owner, name="busy")
    execution = services.execution_create(agent=agent, message="hi", trigger="api")
    # The executor's own finish of a turn served on the agent's plan.
    state = turn_state_start(execution, agent)
    baseline = lifecycle.baseline_rung(agent)
    assert baseline is not None
    own = state.keep(baseline)
    facts = AgentFacts(agent.name, agent.subscription_id, own, agent.routing_policy)
    state.evidence = replace(state.evidence, agent=facts)
    state.last_outcome = TurnOutcome(status_code=200, ok=True)
    served(state, Finish(own, Why.ASSIGNED))

    with django_assert_num_queries(0):
        data = ExecutionOutput(execution).data

    assert data["served_by_subscription"] == {"id": plan.pk, "name": "plan-own"}
    # The agent's owner came with the agent (one join in its one SELECT): no query.
    assert data["agent_owner"] == owner.username
    execution.refresh_from_db()
    assert execution.served_by_subscription_id == plan.pk


def test_it_loads_the_subscription_that_served_when_the_turn_walked_to_another(
    owner: User,
) -> None:
    plan = SubscriptionFactory.create(name="plan-own")
    other = SubscriptionFactory.create(name="plan-other")
    AgentFactory.create(name="busy", owner=owner, subscription=plan)
    agent = agent_get_visible(user=owner, name="busy")
    execution = services.execution_create(agent=agent, message="hi", trigger="api")
    _served_by(execution, other.pk)

    assert ExecutionOutput(execution).data["served_by_subscription"] == {
        "id": other.pk,
        "name": "plan-other",
    }
    # The commit moved the agent (as assignment_commit does on the object in memory):
    # its loaded subscription is the old one and must not be named.
    agent.subscription_id = other.pk
    assert ExecutionOutput(execution).data["served_by_subscription"]["name"] == "plan-other"


class _DrfBuilt(ExecutionOutput):
    """The same output with DRF building every field from the model each time."""

    def get_fields(self) -> dict[str, Any]:
        return serializers.ModelSerializer.get_fields(self)


def test_its_fields_are_built_from_the_model_once_and_render_the_same(
    owner: User, django_assert_num_queries: Any
) -> None:
    plan = SubscriptionFactory.create(name="plan-own")
    AgentFactory.create(name="busy", owner=owner, subscription=plan)
    agent = agent_get_visible(user=owner, name="busy")
    execution = services.execution_create(agent=agent, message="hi", trigger="api")
    execution.cost_usd = Decimal("0.0123")
    execution.attempts = [{"name": "plan-own", "outcome": "served"}]
    _served_by(execution, plan.pk)

    first, again = ExecutionOutput(execution), ExecutionOutput(execution)
    assert first.data == again.data == _DrfBuilt(execution).data
    assert again.data["cost_usd"] == "0.012300"
    assert again.data["earliest_reset"] is None
    # Each instance gets fields of its own (DRF binds a field to its serializer).
    assert first.fields["retryable"] is not again.fields["retryable"]
    assert again.fields["retryable"].parent is again
    with mock.patch.object(
        serializers.ModelSerializer, "build_field", side_effect=AssertionError("rebuilt")
    ):
        ExecutionOutput(execution).data  # noqa: B018 - rendering is the assertion
