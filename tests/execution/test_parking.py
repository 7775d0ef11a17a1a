"""Parked turns without an agent server: the park, the claim that runs a turn once,
the reaper that leaves parked rows alone, the sweep that re-sends lost messages."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from execution import parking, services, tasks
from execution.models import Execution, Status
from tests.agents.factories import AgentFactory
from trinity.models import Notification

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RESET = T0 + timedelta(hours=2)


@pytest.fixture
def bot(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


def parked(agent: Agent, *, until: datetime = RESET, at: datetime = T0) -> Execution:
    with time_machine.travel(at, tick=False):
        execution = services.execution_create(
            agent=agent, message="x", trigger="schedule", timeout_seconds=300, queued=True
        )
        Execution.objects.filter(pk=execution.pk).update(status=Status.RUNNING, dispatched_at=at)
        execution.refresh_from_db()
        return parking.execution_park(
            execution=execution,
            agent=agent,
            until=until,
            detail="Tried: plan-a (rate limit); every candidate refused.",
            now=at,
        )


def test_a_parked_turn_keeps_its_trail_its_instant_and_tells_the_operator_once(
    bot: Agent, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = parked(bot)
        parked(bot)  # a second turn parked on the same reset

    first.refresh_from_db()
    assert (first.status, first.parked_until, first.resets_at, first.error_code) == (
        Status.PARKED,
        RESET,
        RESET,
        "",
    )
    assert "plan-a (rate limit)" in first.error_detail and first.finished_at is None
    assert len(callbacks) == 2  # each turn's re-dispatch, sent with its eta on commit
    notice = Notification.objects.get(kind="turn_parked")
    assert notice.title == "A turn is parked until 2026-06-01 14:00 UTC"
    assert notice.data["parked_until"] == RESET.isoformat()


def test_a_delivery_before_the_instant_claims_nothing_and_the_turn_stays_parked(
    bot: Agent, eager: None, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    # Eager Celery delivers the eta message at once, as an early delivery would.
    with (
        time_machine.travel(T0, tick=False),
        django_capture_on_commit_callbacks(execute=True) as delivered,
    ):
        execution = parked(bot)
    assert len(delivered) == 1
    execution.refresh_from_db()
    assert execution.status == Status.PARKED
    with time_machine.travel(RESET - timedelta(seconds=1), tick=False):
        assert tasks.run_parked_turn(str(execution.pk)) == "not_due"
    execution.refresh_from_db()
    assert execution.status == Status.PARKED


def test_the_claim_at_the_instant_renews_the_deadline_and_a_second_claim_gets_nothing(
    bot: Agent,
) -> None:
    execution = parked(bot)
    budget = execution.deadline - execution.created_at  # type: ignore[operator]
    at = RESET + timedelta(seconds=5)

    claimed = parking.execution_unpark(execution_id=str(execution.pk), now=RESET)
    again = parking.execution_unpark(execution_id=str(execution.pk), now=at)

    assert claimed is not None and again is None
    assert (claimed.status, claimed.dispatched_at, claimed.deadline) == (
        Status.RUNNING,
        RESET,
        RESET + budget,
    )
    assert claimed.error_detail == "" and claimed.resets_at is None
    assert claimed.parked_until == RESET  # when it waited until stays on the row


def test_the_reaper_leaves_a_parked_turn_alone_past_its_old_deadline(bot: Agent) -> None:
    execution = parked(bot)
    assert execution.deadline is not None and execution.deadline < RESET

    assert services.executions_reap(now=RESET - timedelta(minutes=1)) == 0

    execution.refresh_from_db()
    assert execution.status == Status.PARKED


def test_a_parked_turn_of_a_deleted_agent_fails_when_its_instant_comes(
    bot: Agent, eager: None
) -> None:
    execution = parked(bot)
    bot.delete()

    assert services.execution_run_parked(execution_id=str(execution.pk), now=RESET) == "ran"

    execution.refresh_from_db()
    assert (execution.status, execution.error_code) == (Status.FAILED, "container_fault")
    assert services.execution_run_parked(execution_id=str(execution.pk), now=RESET) == "not_due"


def test_the_sweep_resends_only_parked_turns_whose_message_had_its_chance(
    owner: User, eager: None
) -> None:
    # Deleted agents: a re-sent turn is claimed and finished without an agent server.
    lost = parked(AgentFactory.create(owner=owner), until=RESET)
    just_due = parked(AgentFactory.create(owner=owner), until=RESET + timedelta(seconds=30))
    Agent.objects.all().delete()
    now = RESET + parking.RESEND_GRACE + timedelta(seconds=1)

    assert parking.executions_parked_resend(now=now) == 1

    lost.refresh_from_db()
    just_due.refresh_from_db()
    assert lost.status == Status.FAILED  # claimed and run: its agent was gone
    assert just_due.status == Status.PARKED  # its eta message may still be on its way
    assert parking.executions_parked_resend(now=now) == 0


def test_the_api_shows_a_parked_turn_with_its_instant(bot: Agent, owner_client: APIClient) -> None:
    execution = parked(bot)

    body = owner_client.get(f"/api/executions/{execution.pk}").json()

    assert (body["status"], body["parked_until"]) == ("parked", "2026-06-01T14:00:00Z")
    listed = owner_client.get("/api/executions", {"status": "parked"}).json()["results"]
    assert [row["id"] for row in listed] == [str(execution.pk)]
