"""Concurrent key turns racing for one budget: each thread has its own database
connection (its own transaction), all released at once by a barrier. Admission is the
conditional update itself, so the budget is overshot by at most one turn's estimate."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection

from agents.models import Agent
from subscriptions.key_spend import (
    BudgetClosed,
    Reservation,
    agent_scope,
    key_spend_reserve,
    key_spend_settle,
)
from subscriptions.models import FLEET_SCOPE, KeySpend
from tests.agents.factories import AgentFactory
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db(transaction=True)

D = Decimal
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
RACERS = 24


def race(work: Callable[[int], object]) -> list[object]:
    """Run ``work`` in RACERS threads released together; each closes its connection."""
    barrier = threading.Barrier(RACERS)
    results: list[object] = [None] * RACERS
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work(index)
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


@pytest.fixture
def agent(owner: User) -> Agent:
    agent: Agent = AgentFactory.create(name="bot", owner=owner, key_budget_daily_usd=D("5.00"))
    return agent


@pytest.mark.parametrize(
    ("spent_before", "admitted"),
    [
        ("0", 5),  # 5 x $1.00 reach $5.00 exactly: the sixth finds it hit and is refused
        ("4.50", 1),  # one gets in under the budget and may overshoot it by its own cost
        ("5.00", 0),  # hit exactly: nobody
    ],
)
def test_concurrent_reservations_admit_no_more_than_the_budget_holds(
    agent: Agent, spent_before: str, admitted: int
) -> None:
    system = system_settings_get()
    key_spend_reserve(agent=agent, system=system, usd=D("0"), now=NOW)  # the rows exist
    KeySpend.objects.filter(scope=agent_scope(agent.pk), period="day").update(
        spent_usd=D(spent_before)
    )

    results = race(lambda _: key_spend_reserve(agent=agent, system=system, usd=D("1.00"), now=NOW))

    passed = [r for r in results if isinstance(r, Reservation)]
    assert len(passed) == admitted
    assert all(isinstance(r, BudgetClosed) for r in results if r not in passed)
    day = KeySpend.objects.get(scope=agent_scope(agent.pk), period="day")
    assert day.reserved_usd == D(admitted)
    assert day.spent_usd + day.reserved_usd < D("5.00") + D("1.00")
    # All or none: the fleet's rows hold exactly what the admitted turns reserved.
    fleet = KeySpend.objects.get(scope=FLEET_SCOPE, period="day")
    assert fleet.reserved_usd == D(admitted)


def test_turns_that_reserve_and_settle_concurrently_overspend_by_at_most_one_turn(
    agent: Agent, owner: User
) -> None:
    """Two agents, each turn reserving and then spending its real cost, against the
    fleet's daily budget: no row is left reserved and the spend stays under budget +
    one turn, with no deadlock between reservations and settlements."""
    other: Agent = AgentFactory.create(name="other", owner=owner)
    system = system_settings_get()
    system.key_budget_daily_usd = D("3.00")
    system.save()
    cost = D("0.70")

    def turn(index: int) -> bool:
        who = agent if index % 2 else other
        admitted = key_spend_reserve(agent=who, system=system, usd=cost, now=NOW)
        if not isinstance(admitted, Reservation):
            return False
        key_spend_settle(ledger_ids=admitted.ledger_ids, reserved=cost, spent=cost)
        return True

    served = sum(bool(r) for r in race(turn))

    fleet = KeySpend.objects.get(scope=FLEET_SCOPE, period="day")
    assert fleet.reserved_usd == D("0")
    assert fleet.spent_usd == served * cost
    assert D("3.00") <= fleet.spent_usd < D("3.00") + cost
    assert served == 5  # 4 x 0.70 = 2.80 < 3.00 admits a fifth; 3.50 closes
