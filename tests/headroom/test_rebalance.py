"""Proactive rebalancing from the sweep: the balanced strategy's hysteresis moves an
assignment through the compare-and-set, once, with one notice; banded never moves."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import override_settings

from agents.models import Agent, RoutingPolicy
from routing.headroom.reading import Reading
from simulator.control import SimulatorControl
from subscriptions.headroom.rebalance import assignments_rebalance
from subscriptions.headroom.store import snapshots_write
from subscriptions.tasks import sweep_headroom
from tests.agents.factories import AgentFactory
from tests.headroom.factories import plan_on
from tests.headroom.readings import T0, reading
from tests.headroom.test_store import UNREACHABLE_REDIS
from tests.subscriptions.factories import SubscriptionFactory
from trinity.models import Notification, RoutingStrategy
from trinity.selectors import system_settings_get

WEEK = timedelta(days=7)


def _strategy(value: str) -> None:
    system = system_settings_get()
    system.routing_strategy = value
    system.save()


def _weekly(used: float) -> Reading:
    return reading(
        five_hour=0,
        seven_day=used,
        five_hour_resets_in=timedelta(hours=5),
        seven_day_resets_in=WEEK,
    )


@pytest.fixture(autouse=True)
def _rebalance_on(settings: Any) -> None:
    settings.TRINITY_REBALANCE = True


@pytest.mark.django_db
def test_rebalance_is_off_unless_the_setting_turns_it_on(settings: Any) -> None:
    settings.TRINITY_REBALANCE = False
    _strategy(RoutingStrategy.BALANCED)
    a, b = (SubscriptionFactory.create(name=n) for n in ("a", "b"))
    snapshots_write({a.pk: _weekly(99.5), b.pk: _weekly(0.0)})
    AgentFactory.create(subscription=a)
    assert assignments_rebalance(now=T0).skipped == "off"
    assert Agent.objects.get().subscription_id == a.pk


@pytest.mark.django_db(transaction=True)
def test_the_sweep_moves_an_agent_off_a_nearly_spent_plan_under_balanced(
    sim: SimulatorControl,
) -> None:
    spent = plan_on(sim, seven_day=99.0)
    roomy = plan_on(sim, seven_day=10.0)
    agent = AgentFactory.create(subscription=spent, model="claude-sonnet-4-5")
    _strategy(RoutingStrategy.BANDED)
    with time_machine.travel(T0, tick=False):
        banded = sweep_headroom.apply().get()
        assert banded["rebalanced"] == 0
        agent.refresh_from_db()
        assert agent.subscription_id == spent.pk
        _strategy(RoutingStrategy.BALANCED)
        sim.set_clock(T0 + timedelta(minutes=6))
    with time_machine.travel(T0 + timedelta(minutes=6), tick=False):
        result = sweep_headroom.apply().get()
    assert result["rebalanced"] == 1
    agent.refresh_from_db()
    assert agent.subscription_id == roomy.pk
    assert agent.last_switch["why"]["why"] == "rebalance"
    assert agent.last_switch["why"]["move"] == "leave"
    notices = Notification.objects.filter(kind="subscription_switched", agent_name=agent.name)
    assert notices.count() == 1
    assert "balanced strategy moved it between turns" in notices.get().body


@pytest.mark.django_db
def test_rebalance_moves_only_past_the_margin_and_never_a_pinned_agent() -> None:
    _strategy(RoutingStrategy.BALANCED)
    a, b, c = (SubscriptionFactory.create(name=n) for n in ("a", "b", "c"))
    snapshots_write({a.pk: _weekly(50.0), b.pk: _weekly(45.0), c.pk: _weekly(39.0)})
    on_a = AgentFactory.create(subscription=a)
    pinned = AgentFactory.create(subscription=a, routing_policy=RoutingPolicy.PINNED)
    # c has 61 left against a's 50: strictly more than 20 % better.
    report = assignments_rebalance(now=T0)
    assert report.moved == [(on_a.name, a.pk, c.pk)]
    pinned.refresh_from_db()
    assert pinned.subscription_id == a.pk
    # b has 55 left against a's 50: 10 %, no move.
    snapshots_write({c.pk: _weekly(95.0)})
    Agent.objects.filter(pk=on_a.pk).update(subscription=a)
    assert assignments_rebalance(now=T0).moved == []


@pytest.mark.django_db
def test_rebalance_does_nothing_under_banded_without_auto_switch_or_the_store() -> None:
    a, b = (SubscriptionFactory.create(name=n) for n in ("a", "b"))
    snapshots_write({a.pk: _weekly(99.5), b.pk: _weekly(0.0)})
    AgentFactory.create(subscription=a)
    _strategy(RoutingStrategy.BANDED)
    assert assignments_rebalance(now=T0).skipped == "banded"
    _strategy(RoutingStrategy.BALANCED)
    system = system_settings_get()
    system.auto_switch_subscriptions = False
    system.save()
    assert assignments_rebalance(now=T0).skipped == "auto_switch_off"
    system.auto_switch_subscriptions = True
    system.save()
    with override_settings(CACHES=UNREACHABLE_REDIS):
        assert assignments_rebalance(now=T0).skipped == "store_unreachable"
    assert Agent.objects.get().subscription_id == a.pk
    assert assignments_rebalance(now=T0).moved != []
