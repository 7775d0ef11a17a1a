"""The platform's side of the metered key: the remaining budget it sends with the key,
the metered spend it reads back from the agent server's answer, and the settlement
of a key reservation at that spend (a turn that failed after spending included)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from agents.client import parse_turn_response
from agents.models import Agent
from execution import key_reservation
from execution.models import Execution, Status
from execution.protection import key_settle
from execution.turn_state import turn_state_start
from routing.attempt_refusal import classify_attempt_refusal
from subscriptions.key_spend import (
    Budget,
    Reservation,
    key_spend_reserve,
    tightest_remaining,
)
from subscriptions.models import FLEET_SCOPE, KeySpend
from tests.agents.factories import AgentFactory
from trinity.models import SystemSettings
from trinity.selectors import system_settings_get

D = Decimal
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
AGENT_DAY = Budget("agent:1", "day", D("5.00"), "agent 'bot'")
FLEET_MONTH = Budget(FLEET_SCOPE, "month", D("20.00"), "the fleet")


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        ([], None),
        ([(AGENT_DAY, D("1"), D("0"))], (D("4"), AGENT_DAY)),
        # what other turns hold counts against what is left
        ([(AGENT_DAY, D("1"), D("2.5"))], (D("1.5"), AGENT_DAY)),
        # the tightest of several caps, whichever scope and period
        ([(AGENT_DAY, D("1"), D("0")), (FLEET_MONTH, D("18"), D("0"))], (D("2"), FLEET_MONTH)),
        # overspent: nothing left, never negative
        ([(AGENT_DAY, D("6"), D("1"))], (D("0"), AGENT_DAY)),
    ],
)
def test_the_tightest_remaining_budget(
    lines: list[tuple[Budget, Decimal, Decimal]], want: tuple[Decimal, Budget] | None
) -> None:
    assert tightest_remaining(lines) == want


@pytest.fixture
def agent(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


@pytest.fixture
def system(db: None) -> SystemSettings:
    return system_settings_get()


def test_a_reservation_carries_the_remaining_budget_net_of_other_turns(
    agent: Agent, system: SystemSettings
) -> None:
    agent.key_budget_daily_usd = D("5.00")
    system.key_budget_daily_usd = D("3.00")  # the fleet's day is the tight one
    first = key_spend_reserve(agent=agent, system=system, usd=D("0.40"), now=NOW)
    KeySpend.objects.filter(scope=FLEET_SCOPE, period="day").update(spent_usd=D("1.00"))

    second = key_spend_reserve(agent=agent, system=system, usd=D("0.25"), now=NOW)

    assert isinstance(first, Reservation) and isinstance(second, Reservation)
    assert first.remaining_usd == D("3.00")
    assert first.remaining_of == "the platform key's fleet-wide daily budget of $3.00"
    # $3 less $1 spent less the first turn's $0.40 (its own $0.25 is its to spend).
    assert second.remaining_usd == D("1.60")


def test_a_reservation_without_a_cap_sends_no_budget(agent: Agent, system: SystemSettings) -> None:
    admitted = key_spend_reserve(agent=agent, system=system, usd=D("0.40"), now=NOW)
    assert isinstance(admitted, Reservation)
    assert (admitted.remaining_usd, admitted.remaining_of) == (None, None)


def answer(status: int, body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode())


METERED = {
    "requests": 5,
    "cost_usd": 1.2321,
    "by_model": {
        "claude-sonnet-4-5": {"input_tokens": 400_000, "output_tokens": 40, "cost_usd": 1.2},
        "claude-haiku-4-5": {"input_tokens": 30_000, "output_tokens": 300, "cost_usd": 0.0321},
    },
    "budget_usd": 1.0,
    "budget_refused": 2,
    "unmetered": 0,
}


def test_a_refused_answer_carries_the_spend_of_its_served_requests() -> None:
    outcome = parse_turn_response(
        answer(
            402,
            {
                "error_code": "billing",
                "detail": "The platform key's daily budget is reached",
                "execution_id": "e",
                "metered": METERED,
            },
        )
    )
    assert not outcome.ok and outcome.error_code == "billing"
    assert outcome.metered is not None and outcome.metered.budget_refused == 2
    assert (outcome.input_tokens, outcome.output_tokens) == (430_000, 340)
    assert outcome.cost_usd == pytest.approx(1.2321)
    assert outcome.metered.cost == D("1.232100")  # as the ledger and the row keep it
    # A budget refusal is the platform's own cap: neither recorded nor walked.
    refusal = classify_attempt_refusal(error_code=outcome.error_code, detail=outcome.detail)
    assert (refusal.failure_kind, refusal.walks) == (None, False)


def test_an_answer_without_metering_keeps_the_reported_cost() -> None:
    outcome = parse_turn_response(
        answer(200, {"response": "hi", "model": "m", "usage": {}, "cost_usd": 0.04})
    )
    assert outcome.metered is None and outcome.cost_usd == 0.04


@pytest.mark.parametrize(
    "metered",
    [
        "lots",
        {"requests": -1},
        {"requests": 1, "cost_usd": -3},
        {"requests": 1, "by_model": {"m": "x"}},
        {"requests": 1, "by_model": {"m": {"input_tokens": 1.5}}},
    ],
)
def test_an_off_contract_metered_spend_is_a_fault(metered: Any) -> None:
    outcome = parse_turn_response(
        answer(200, {"response": "", "model": "m", "usage": {}, "metered": metered})
    )
    assert outcome.error_code == "container_fault"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("status", "body", "spent"),
    [
        # served: the metered sum, not the CLI's report
        (
            200,
            {"response": "", "model": "m", "usage": {}, "cost_usd": 0.04, "metered": METERED},
            "1.232100",
        ),
        # refused at the budget after spending: what it spent
        (
            402,
            {"error_code": "billing", "detail": "d", "execution_id": "e", "metered": METERED},
            "1.232100",
        ),
        # a timeout that had spent: no longer the estimate, the metered sum
        (
            504,
            {"error_code": "timeout", "detail": "d", "execution_id": "e", "metered": METERED},
            "1.232100",
        ),
        # an agent server that predates metering: as before (a refusal for quota is free)
        (429, {"error_code": "rate_limit", "detail": "d", "execution_id": "e"}, "0"),
    ],
    ids=["served", "budget", "timeout", "legacy-refusal"],
)
def test_a_key_reservation_settles_at_the_metered_spend(
    agent: Agent, system: SystemSettings, status: int, body: dict[str, Any], spent: str
) -> None:
    system.key_budget_daily_usd = D("10.00")
    system.save()
    execution = Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        message="m",
        status=Status.RUNNING,
        created_at=NOW,
        deadline=NOW + timedelta(minutes=15),
    )
    reservation = key_reservation.turn_key_reserve(
        execution=execution, agent=agent, system=system, now=NOW
    )
    assert isinstance(reservation, Reservation)
    state = turn_state_start(execution, agent)
    state.key_reserved, state.key_reservation = True, reservation

    key_settle(state, parse_turn_response(answer(status, body)))

    execution.refresh_from_db()
    settled = execution.key_reservation
    assert settled is not None and settled["settled"] is True
    assert D(settled["spent"]) == D(spent)
    day = KeySpend.objects.get(scope=FLEET_SCOPE, period="day")
    assert (day.spent_usd, day.reserved_usd) == (D(spent), D("0"))
