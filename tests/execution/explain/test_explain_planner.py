"""The explainer is the planner: a chat session's affinity and parking come from it,
and its loop gives a real turn's order by construction (the same ``plan`` on the same
evidence). Real Postgres and Redis for the explanations; the table rows are pure."""

from __future__ import annotations

from collections import deque
from datetime import timedelta
from typing import Any

import pytest

from agents.models import Agent, WaitPolicy
from execution.explain.explanation import (
    QUOTA,
    Explanation,
    explain_drive,
    routing_explain,
)
from execution.explain.text import explanation_text
from execution.models import Execution, Status
from routing.planner import Attempt, Event, Evidence, KeyState, Need, Outcome, Send
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.headroom.readings import T0, limited, reading
from tests.planner import world as tables
from tests.subscriptions.factories import SubscriptionFactory

HOUR = timedelta(hours=1)


def _agent_on(subscription: Subscription, **fields: Any) -> Agent:
    agent = AgentFactory.create(name="bot", **fields)
    agent = subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)
    return Agent.objects.select_related("subscription").get(pk=agent.pk)


def _served(agent: Agent, session_id: str, on: Subscription) -> None:
    Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        message="earlier",
        session_id=session_id,
        status=Status.SUCCEEDED,
        served_by_kind="subscription",
        served_by_subscription=on,
        created_at=T0 - HOUR,
    )


@pytest.mark.django_db
class TestAffinity:
    def test_a_chat_session_starts_on_the_plan_that_served_its_previous_turn(self) -> None:
        mine, other = (
            SubscriptionFactory.create(name="mine"),
            SubscriptionFactory.create(name="other"),
        )
        snapshots_write({mine.pk: reading(seven_day=20.0), other.pk: reading(seven_day=30.0)})
        agent = _agent_on(mine)
        _served(agent, "s-1", other)

        e = routing_explain(agent=agent, now=T0, session_id="s-1")
        assert e.first is not None and (e.first.name, e.first.why) == ("other", "affinity")
        assert (e.pre_dispatch, e.session_id) == ("affinity", "s-1")

        # Another session, or none, starts on the assignment.
        for session in ("s-2", ""):
            e = routing_explain(agent=agent, now=T0, session_id=session)
            assert e.first is not None and (e.first.name, e.pre_dispatch) == ("mine", "serving")

    def test_a_session_whose_plan_refuses_now_is_not_kept_there(self) -> None:
        mine, other = (
            SubscriptionFactory.create(name="mine"),
            SubscriptionFactory.create(name="other"),
        )
        snapshots_write({mine.pk: reading(seven_day=20.0), other.pk: limited()})
        agent = _agent_on(mine)
        _served(agent, "s-1", other)

        e = routing_explain(agent=agent, now=T0, session_id="s-1")
        assert e.first is not None and (e.first.name, e.pre_dispatch) == ("mine", "serving")


@pytest.mark.django_db
class TestParking:
    def _exhausted(self, wait_policy: str) -> Agent:
        mine, other = (
            SubscriptionFactory.create(name="mine"),
            SubscriptionFactory.create(name="other"),
        )
        snapshots_write({mine.pk: limited(resets_in=2 * HOUR), other.pk: limited(resets_in=HOUR)})
        return _agent_on(mine, wait_policy=wait_policy)

    def test_an_exhausted_autonomous_turn_parks_until_a_plan_resets(self) -> None:
        agent = self._exhausted(WaitPolicy.WAIT)

        autonomous = routing_explain(agent=agent, now=T0, autonomous=True)
        assert autonomous.ends == "park" and autonomous.parks_until is not None
        assert T0 < autonomous.parks_until <= T0 + 2 * HOUR + timedelta(minutes=5)

        # An interactive turn fails; the explanation still says what an autonomous one does.
        interactive = routing_explain(agent=agent, now=T0)
        assert interactive.ends == "fail"
        assert interactive.parks_until == autonomous.parks_until
        assert any("parks until" in line for line in _text(interactive))

    def test_an_agent_that_fails_fast_never_parks(self) -> None:
        agent = self._exhausted(WaitPolicy.FAIL)

        e = routing_explain(agent=agent, now=T0, autonomous=True)
        assert (e.ends, e.parks_until) == ("fail", None)
        assert any("would not park" in line for line in _text(routing_explain(agent=agent, now=T0)))


def _text(e: Explanation) -> list[str]:
    return explanation_text(e)


# The same planner: the explainer's loop against the planner's table world gives the
# rungs and the end the turn's own loop gives there, when every rung refuses on quota.

ROWS = [
    tables.World(),  # a serving assignment, two ranked plans, the key
    tables.World(refusing=True),  # pre-dispatch routes the first attempt away
    tables.World(forecast_out=True, forecast_out_of=frozenset({2})),  # forecast: only to 3
    tables.World(switching_stop=tables.Stop.PINNED),  # pinned: never walks
    tables.World(at_cap=frozenset({1})),  # the assignment at its cap is routed around
    tables.World(key=KeyState(False), last_resort=(4,)),  # a skip-listed last resort
    tables.World(previous=tables.Previous("subscription", 3)),  # affinity (with a session)
    tables.World(admitted=False),  # an open breaker: nothing sent
]


@pytest.mark.parametrize("world", ROWS)
@pytest.mark.parametrize("autonomous", [False, True])
def test_the_explainer_and_a_turn_agree_on_the_table_rows(
    world: tables.World, autonomous: bool
) -> None:
    facts = tables.turn(autonomous=autonomous, session="s-1", waits=True)
    refusing = {**{tables.plan_rung(pk).key: [QUOTA] * 3 for pk in range(1, 6)}}
    world.outcomes = {**refusing, tables.KEY_RUNG.key: [QUOTA] * 3}
    turn = tables.drive(world, facts)

    queues: dict[Any, deque[Outcome]] = {}

    def answer(evidence: Evidence, need: Need) -> Evidence:
        return tables._answer(world, evidence, need, tables.T0)

    def refuse(evidence: Evidence, send: Send) -> Event:
        return tables._apply(world, evidence, send, queues).history[-1]

    explained = explain_drive(Evidence(turn=facts), answer=answer, refuse=refuse, now=tables.T0)

    # What the turn sent, less the sends its cap or key budget refused (no attempt).
    attempted = [
        send
        for send, event in zip(turn.sends, turn.evidence.history, strict=True)
        if isinstance(event, Attempt)
    ]
    assert explained.sends == attempted and explained.end == turn.end
    if world.admitted and world.switching_stop is None:
        assert len(explained.sends) >= 3  # it walked: the order, not only the first rung
