"""The platform key's spend budgets: the pure rules as tables (with their boundaries),
admission and settlement on the ledger, the walk's closed-rung read, the turn's
reservation recorded on its execution and settled exactly once (the reaper too)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.contrib.auth.models import User

from agents.models import Agent
from execution import key_reservation
from execution.models import Execution, Status
from execution.services import executions_reap
from subscriptions.key_rung_state import KeyClosed, key_rung_available, key_rung_state
from subscriptions.key_spend import (
    Budget,
    BudgetClosed,
    Reservation,
    agent_scope,
    applicable_budgets,
    budget_admits,
    key_budget_closed,
    key_spend_reserve,
    period_end,
    period_start,
)
from subscriptions.models import FLEET_SCOPE, BudgetPeriod, KeySpend
from tests.agents.factories import AgentFactory
from trinity import clock
from trinity import services as trinity_services
from trinity.models import Notification, SystemSettings
from trinity.selectors import system_settings_get

D = Decimal
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


# The rules


@pytest.mark.parametrize(
    ("now", "period", "start", "end"),
    [
        (datetime(2026, 12, 1, 0, 0, tzinfo=UTC), "day", date(2026, 12, 1), "2026-12-02"),
        (datetime(2026, 12, 1, 23, 59, 59, tzinfo=UTC), "day", date(2026, 12, 1), "2026-12-02"),
        (datetime(2026, 12, 31, 12, 0, tzinfo=UTC), "month", date(2026, 12, 1), "2027-01-01"),
        (datetime(2028, 2, 29, 23, 0, tzinfo=UTC), "month", date(2028, 2, 1), "2028-03-01"),
        (datetime(2026, 1, 31, 23, 59, tzinfo=UTC), "day", date(2026, 1, 31), "2026-02-01"),
        # UTC periods: 01:30 at +02:00 is still the previous UTC day.
        (
            datetime.fromisoformat("2026-12-02T01:30:00+02:00"),
            "day",
            date(2026, 12, 1),
            "2026-12-02",
        ),
    ],
)
def test_periods_start_and_end_on_utc_day_and_month_boundaries(
    now: datetime, period: str, start: date, end: str
) -> None:
    assert period_start(period, now=now) == start
    assert period_end(period, now=now) == datetime.fromisoformat(end).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("spent", "reserved", "limit", "admits"),
    [
        ("0", "0", "5.00", True),
        ("4.99", "0", "5.00", True),
        ("4.00", "0.999999", "5.00", True),  # spent + reserved just under admits
        ("5.00", "0", "5.00", False),  # a budget hit exactly is closed
        ("4.00", "1.00", "5.00", False),  # reserved by turns in flight counts
        ("5.01", "0", "5.00", False),
        ("0", "0", "0", False),  # a zero budget never admits
    ],
)
def test_a_budget_admits_only_while_spent_plus_reserved_is_under_it(
    spent: str, reserved: str, limit: str, admits: bool
) -> None:
    assert budget_admits(spent=D(spent), reserved=D(reserved), limit=D(limit)) is admits


def test_only_the_caps_that_are_set_apply() -> None:
    budgets = applicable_budgets(
        agent_id=7,
        agent_name="bot",
        agent_daily=D("5"),
        agent_monthly=None,
        fleet_daily=None,
        fleet_monthly=D("0"),  # zero is a cap (the key is closed), not "no cap"
    )
    assert [(b.scope, b.period, b.limit_usd) for b in budgets] == [
        ("agent:7", "day", D("5")),
        (FLEET_SCOPE, "month", D("0")),
    ]
    assert (
        applicable_budgets(
            agent_id=7,
            agent_name="bot",
            agent_daily=None,
            agent_monthly=None,
            fleet_daily=None,
            fleet_monthly=None,
        )
        == []
    )


@pytest.mark.parametrize(
    ("budget", "spent", "reserved", "reason"),
    [
        (
            Budget("agent:1", "day", D("5.00"), "agent 'bot'"),
            "5.00",
            "0",
            "the platform key's daily budget of $5.00 for agent 'bot' is spent",
        ),
        (
            Budget(FLEET_SCOPE, "month", D("100"), "the fleet"),
            "100.40",
            "0",
            "the platform key's fleet-wide monthly budget of $100.00 is spent",
        ),
        (
            Budget("agent:1", "day", D("5.00"), "agent 'bot'"),
            "4.00",
            "1.00",
            "the platform key's daily budget of $5.00 for agent 'bot' is taken: $4.00 spent "
            "and $1.00 reserved by key turns in flight",
        ),
    ],
)
def test_a_closed_budget_says_which_budget_and_why(
    budget: Budget, spent: str, reserved: str, reason: str
) -> None:
    closed = BudgetClosed(budget, D(spent), D(reserved), date(2026, 12, 1), NOW)
    assert closed.reason == reason


# The ledger


@pytest.fixture
def agent(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


@pytest.fixture
def system(db: None) -> SystemSettings:
    return system_settings_get()


def ledger(scope: str, period: str = "day") -> KeySpend:
    return KeySpend.objects.get(scope=scope, period=period, starts_on=period_start(period, now=NOW))


def test_a_reservation_holds_the_estimate_on_the_agents_and_the_fleets_rows(
    agent: Agent, system: SystemSettings
) -> None:
    agent.key_budget_daily_usd = D("5.00")

    admitted = key_spend_reserve(agent=agent, system=system, usd=D("0.40"), now=NOW)

    assert isinstance(admitted, Reservation) and admitted.usd == D("0.40")
    rows = KeySpend.objects.order_by("pk")
    assert sorted(admitted.ledger_ids) == [r.pk for r in rows]
    # Uncapped rows are written too, so a cap set later knows today's spend.
    assert {(r.scope, r.period, r.reserved_usd, r.spent_usd) for r in rows} == {
        (agent_scope(agent.pk), "day", D("0.40"), D("0")),
        (agent_scope(agent.pk), "month", D("0.40"), D("0")),
        (FLEET_SCOPE, "day", D("0.40"), D("0")),
        (FLEET_SCOPE, "month", D("0.40"), D("0")),
    }


def test_a_closed_budget_refuses_the_reservation_on_every_row(
    agent: Agent, system: SystemSettings
) -> None:
    agent.key_budget_daily_usd = D("5.00")
    system.key_budget_monthly_usd = D("2.00")  # the fleet's month is the tight one
    key_spend_reserve(agent=agent, system=system, usd=D("0"), now=NOW)
    KeySpend.objects.filter(scope=FLEET_SCOPE, period="month").update(spent_usd=D("2.00"))

    refused = key_spend_reserve(agent=agent, system=system, usd=D("0.40"), now=NOW)

    assert isinstance(refused, BudgetClosed)
    assert refused.budget.scope == FLEET_SCOPE and refused.budget.period == "month"
    assert refused.reopens_at == datetime(2027, 1, 1, tzinfo=UTC)
    # All or none: the agent's rows, which would admit, hold nothing either.
    assert set(KeySpend.objects.values_list("reserved_usd", flat=True)) == {D("0")}


def test_the_walks_read_sees_a_budget_spent_exactly_as_closed(
    agent: Agent, system: SystemSettings
) -> None:
    assert key_budget_closed(agent=agent, system=system, now=NOW) is None  # no cap
    agent.key_budget_daily_usd = D("1.00")
    assert key_budget_closed(agent=agent, system=system, now=NOW) is None  # no row yet
    key_spend_reserve(agent=agent, system=system, usd=D("0"), now=NOW)
    KeySpend.objects.filter(scope=agent_scope(agent.pk), period="day").update(
        spent_usd=D("0.999999")
    )
    assert key_budget_closed(agent=agent, system=system, now=NOW) is None
    KeySpend.objects.filter(scope=agent_scope(agent.pk), period="day").update(spent_usd=D("1"))

    closed = key_budget_closed(agent=agent, system=system, now=NOW)

    assert closed is not None and closed.budget.period == "day"
    # The next UTC day is a new period: the rung opens again.
    tomorrow = NOW + timedelta(days=1)
    assert key_budget_closed(agent=agent, system=system, now=tomorrow) is None


def test_a_consumed_budget_closes_the_key_rung_for_the_walk(
    agent: Agent, system: SystemSettings
) -> None:
    trinity_services.platform_api_key_set(key="sk-ant-api03-" + "k" * 40)
    system = system_settings_get()
    assert key_rung_state(agent=agent, system=system, now=NOW).available
    agent.key_budget_daily_usd = D("0.50")
    key_spend_reserve(agent=agent, system=system, usd=D("0.50"), now=NOW)

    state = key_rung_state(agent=agent, system=system, now=NOW)

    assert state.closed is KeyClosed.BUDGET and state.budget is not None
    assert not key_rung_available(agent=agent, system=system, now=NOW)


# A turn's reservation


def key_turn(agent: Agent, *, cost: str | None, status: str = Status.SUCCEEDED) -> Execution:
    return Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        message="m",
        status=status,
        served_by_kind="api_key",
        cost_usd=D(cost) if cost is not None else None,
        created_at=clock.now(),
        deadline=clock.now() + timedelta(minutes=15),
    )


def test_the_estimate_is_the_mean_of_the_agents_latest_key_turns_else_the_default(
    agent: Agent, settings: object
) -> None:
    assert key_reservation.key_turn_estimate(agent=agent) == D("0.25")
    key_turn(agent, cost="0.10")
    key_turn(agent, cost="0.30")
    key_turn(agent, cost=None)  # no reported cost says nothing about the mean
    key_turn(agent, cost="9.00", status=Status.FAILED)

    assert key_reservation.key_turn_estimate(agent=agent) == D("0.20")


def test_a_zero_mean_falls_back_to_the_default_estimate(agent: Agent) -> None:
    key_turn(agent, cost="0")
    assert key_reservation.key_turn_estimate(agent=agent) == D("0.25")


@pytest.mark.parametrize(
    ("served", "cost", "unbilled", "spent"),
    [
        (True, "0.31", False, D("0.31")),
        (True, None, False, None),  # served, no cost reported: charged at the estimate
        (False, None, True, D("0")),  # refused (quota, credit, credential) or a 5xx
        (False, None, False, None),  # timeout, kill: may have been billed
    ],
)
def test_what_a_key_attempt_spends(
    served: bool, cost: str | None, unbilled: bool, spent: Decimal | None
) -> None:
    assert (
        key_reservation.settled_cost(
            served=served, cost_usd=D(cost) if cost else None, unbilled=unbilled
        )
        == spent
    )


@time_machine.travel(NOW, tick=False)
def test_a_turn_reserves_then_settles_its_real_cost_exactly_once(
    agent: Agent, system: SystemSettings
) -> None:
    agent.key_budget_daily_usd = D("5.00")
    agent.save()
    execution = key_turn(agent, cost=None, status=Status.RUNNING)

    admitted = key_reservation.turn_key_reserve(
        execution=execution, agent=agent, system=system, now=NOW
    )

    assert isinstance(admitted, Reservation)
    execution.refresh_from_db()
    assert execution.key_reservation == {**admitted.as_json(), "settled": False}
    assert ledger(agent_scope(agent.pk)).reserved_usd == D("0.25")

    settled = key_reservation.turn_key_settle(execution_id=execution.pk, spent=D("0.31"))
    again = key_reservation.turn_key_settle(execution_id=execution.pk, spent=D("0.31"))

    assert settled is not None and settled["spent"] == "0.31" and again is None
    for scope in (agent_scope(agent.pk), FLEET_SCOPE):
        for period in ("day", "month"):
            row = ledger(scope, period)
            assert (row.spent_usd, row.reserved_usd) == (D("0.31"), D("0")), (scope, period)


@time_machine.travel(NOW, tick=False)
def test_a_refused_key_attempt_gives_its_reservation_back(
    agent: Agent, system: SystemSettings
) -> None:
    execution = key_turn(agent, cost=None, status=Status.RUNNING)
    key_reservation.turn_key_reserve(execution=execution, agent=agent, system=system, now=NOW)

    key_reservation.turn_key_settle(execution_id=execution.pk, spent=D("0"))

    row = ledger(agent_scope(agent.pk))
    assert (row.spent_usd, row.reserved_usd) == (D("0"), D("0"))


@time_machine.travel(NOW, tick=False)
def test_the_reaper_settles_a_lost_turns_reservation_at_the_estimate_once(
    agent: Agent, system: SystemSettings
) -> None:
    execution = key_turn(agent, cost=None, status=Status.RUNNING)
    key_reservation.turn_key_reserve(execution=execution, agent=agent, system=system, now=NOW)
    Execution.objects.filter(pk=execution.pk).update(deadline=NOW - timedelta(seconds=1))

    assert executions_reap(now=NOW) == 1
    assert executions_reap(now=NOW) == 0
    # The lost worker's own finish, arriving late, settles nothing more.
    assert key_reservation.turn_key_settle(execution_id=execution.pk, spent=D("9")) is None

    execution.refresh_from_db()
    assert execution.status == Status.FAILED
    assert (execution.key_reservation or {}).get("settled") is True
    row = ledger(agent_scope(agent.pk))
    assert (row.spent_usd, row.reserved_usd) == (D("0.25"), D("0"))


@time_machine.travel(NOW, tick=False)
def test_a_closed_budget_tells_the_operator_once_per_budget_and_period(
    agent: Agent, system: SystemSettings, django_capture_on_commit_callbacks: object
) -> None:
    agent.key_budget_daily_usd = D("0")
    agent.save()

    for _ in range(3):
        execution = key_turn(agent, cost=None, status=Status.RUNNING)
        with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
            closed = key_reservation.turn_key_reserve(
                execution=execution, agent=agent, system=system, now=NOW
            )
        assert isinstance(closed, BudgetClosed)
        execution.refresh_from_db()
        assert execution.key_reservation is None  # nothing was reserved

    notice = Notification.objects.get(kind="key_budget_closed")
    assert notice.body.startswith("The platform key's daily budget of $0.00 for agent 'bot'")
    assert notice.data["period"] == BudgetPeriod.DAY
