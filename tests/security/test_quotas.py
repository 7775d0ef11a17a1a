"""Quotas: agents per operator, schedules per agent, a schedule's smallest interval
and message length, and concurrent turns per agent; each a clear 4xx through the one
exception handler, each changed by a setting."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent
from execution import services
from execution.models import Execution, Schedule, Status, Trigger
from execution.schedules import services as schedules
from execution.schedules.cron import cron_smallest_gap
from tests.agents.factories import AgentFactory
from trinity.errors import TooManyTurns

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def agent_body(name: str) -> dict[str, Any]:
    return {"name": name, "runtime": "claude-code", "autostart": False, "auto_assign": False}


# --- agents per operator ------------------------------------------------------------


@pytest.mark.django_db
def test_an_operator_past_the_agent_cap_gets_a_403_naming_the_cap(
    owner_client: APIClient, settings: Any
) -> None:
    settings.TRINITY_MAX_AGENTS_PER_OPERATOR = 2
    codes = [owner_client.post("/api/agents", agent_body(f"a{i}"), format="json") for i in range(3)]

    assert [r.status_code for r in codes] == [201, 201, 403]
    assert codes[2].json()["code"] == "quota_exceeded"
    assert "2 agents" in codes[2].json()["detail"]
    assert Agent.objects.count() == 2


@pytest.mark.django_db
def test_the_agent_cap_counts_each_operator_apart_and_exempts_admins(
    owner: User,
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    settings: Any,
) -> None:
    settings.TRINITY_MAX_AGENTS_PER_OPERATOR = 1
    AgentFactory.create(name="mine", owner=owner)

    assert owner_client.post("/api/agents", agent_body("mine2"), format="json").status_code == 403
    assert other_client.post("/api/agents", agent_body("theirs"), format="json").status_code == 201
    for i in range(3):
        created = admin_client_api.post("/api/agents", agent_body(f"fleet{i}"), format="json")
        assert created.status_code == 201


@pytest.mark.django_db(transaction=True)
def test_racing_creates_never_pass_the_agent_cap(owner: User, settings: Any) -> None:
    """Each thread has its own database connection: the cap holds by a row lock in the
    database, not by anything this process remembers."""
    from agents import services as agent_services
    from trinity.errors import QuotaExceeded

    settings.TRINITY_MAX_AGENTS_PER_OPERATOR = 3
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def create(index: int) -> None:
        try:
            barrier.wait()
            agent_services.agent_create(
                owner=owner, name=f"race{index}", runtime="claude-code", autostart=False
            )
            outcomes.append("created")
        except QuotaExceeded:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(outcomes) == ["created"] * 3 + ["refused"] * 3
    assert Agent.objects.filter(owner=owner).count() == 3


# --- schedules ----------------------------------------------------------------------


@pytest.fixture
def bot(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


URL = "/api/agents/bot/schedules"


@pytest.mark.parametrize(
    ("cron", "gap_minutes"),
    [
        ("* * * * *", 1),
        ("*/5 * * * *", 5),
        ("*/7 * * * *", 4),  # :56 then the next hour's :00
        ("0,4 * * * *", 4),
        ("0 * * * *", 60),
        ("0 3 * * *", 24 * 60),
        ("0,59 0,23 * * *", 1),  # 23:59 then the next day's 00:00
        ("0,59 0,23 1,31 1,12 *", 1),  # 31 December 23:59, then 1 January 00:00
        ("0 0 31,1 * *", 24 * 60),  # the 31st then the 1st
        ("0 12 * * 1,2", 24 * 60),  # Monday, then Tuesday
        ("30 9 * * 1", 7 * 24 * 60),
        ("0,30 9 * * 1", 30),
    ],
)
def test_the_smallest_gap_of_a_cron_covers_its_whole_pattern(cron: str, gap_minutes: int) -> None:
    assert cron_smallest_gap(cron) == timedelta(minutes=gap_minutes)


@pytest.mark.parametrize("cron", ["0 0 29 2 *", "59 23 31 12 *"])
def test_a_cron_that_fires_once_in_its_leap_year_window_has_no_gap(cron: str) -> None:
    assert cron_smallest_gap(cron) is None


@pytest.mark.django_db
@time_machine.travel(T0, tick=False)
@pytest.mark.parametrize(
    ("cron", "created"),
    [
        ("* * * * *", False),
        ("*/4 * * * *", False),
        ("0,59 0,23 * * *", False),
        ("*/5 * * * *", True),  # exactly the minimum is allowed
        ("0 3 * * *", True),
    ],
)
def test_a_schedule_more_frequent_than_the_minimum_interval_is_a_400_on_cron(
    bot: Agent, owner_client: APIClient, cron: str, created: bool
) -> None:
    response = owner_client.post(URL, {"name": "s", "cron": cron, "message": "hi"}, format="json")
    if created:
        assert response.status_code == 201, response.content
    else:
        assert response.status_code == 400
        [message] = response.json()["cron"]
        assert "every 5 minutes" in message


@pytest.mark.django_db
@time_machine.travel(T0, tick=False)
def test_the_minimum_interval_is_a_setting_and_applies_to_an_update_too(
    bot: Agent, owner_client: APIClient, settings: Any
) -> None:
    settings.TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS = 3600
    body = {"name": "s", "cron": "0 * * * *", "message": "hi"}
    assert owner_client.post(URL, body, format="json").status_code == 201
    changed = owner_client.patch(f"{URL}/s", {"cron": "*/30 * * * *"}, format="json")
    assert changed.status_code == 400 and "cron" in changed.json()
    assert Schedule.objects.get().cron == "0 * * * *"


@pytest.mark.django_db
@time_machine.travel(T0, tick=False)
def test_a_schedule_message_past_the_limit_is_a_400_on_message(
    bot: Agent, owner_client: APIClient, settings: Any
) -> None:
    settings.TRINITY_SCHEDULE_MESSAGE_MAX_CHARS = 100
    ok = owner_client.post(URL, {"name": "a", "cron": "0 3 * * *", "message": "x" * 100})
    long = owner_client.post(URL, {"name": "b", "cron": "0 3 * * *", "message": "x" * 101})
    patched = owner_client.patch(f"{URL}/a", {"message": "x" * 101}, format="json")

    assert ok.status_code == 201
    assert long.status_code == 400 and "100 characters" in long.json()["message"][0]
    assert patched.status_code == 400 and "message" in patched.json()


@pytest.mark.django_db
@time_machine.travel(T0, tick=False)
def test_an_agent_past_its_schedule_cap_gets_a_403(
    bot: Agent, owner_client: APIClient, settings: Any
) -> None:
    settings.TRINITY_MAX_SCHEDULES_PER_AGENT = 2
    codes = [
        owner_client.post(
            URL, {"name": f"s{i}", "cron": "0 3 * * *", "message": "hi"}, format="json"
        )
        for i in range(3)
    ]
    assert [r.status_code for r in codes] == [201, 201, 403]
    assert codes[2].json()["code"] == "quota_exceeded"
    assert Schedule.objects.filter(agent=bot).count() == 2


# --- concurrent turns per agent -------------------------------------------------------


def in_flight(agent: Agent, count: int, status: str = Status.QUEUED) -> None:
    for i in range(count):
        Execution.objects.create(
            agent=agent,
            agent_name=agent.name,
            message=f"m{i}",
            status=status,
            created_at=T0,
            deadline=T0 + timedelta(hours=1),
        )


# Committed for real: admission runs once the turn's row is committed, as in production.
@pytest.mark.django_db(transaction=True)
def test_a_turn_past_the_agents_concurrency_cap_is_a_429_with_retry_after(
    bot: Agent, owner_client: APIClient, settings: Any
) -> None:
    settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT = 2
    in_flight(bot, 1, Status.QUEUED)
    in_flight(bot, 1, Status.RUNNING)
    in_flight(bot, 3, Status.SUCCEEDED)  # finished turns do not count

    sync = owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")
    queued = owner_client.post(
        "/api/agents/bot/task", {"message": "hi", "async": True}, format="json"
    )
    chat = owner_client.post("/api/agents/bot/chat", {"message": "hi"}, format="json")

    for response in (sync, queued, chat):
        assert response.status_code == 429, response.content
        assert response.json()["code"] == "too_many_turns"
        assert int(response["Retry-After"]) > 0
    assert Execution.objects.filter(agent=bot).count() == 5


@pytest.mark.django_db(transaction=True)
def test_racing_turns_never_pass_the_concurrency_cap(owner: User, settings: Any) -> None:
    """Own connections per thread, each turn's row committed before its admission, as
    on the API's path: the cap holds in the database, not in this process, and a burst
    admits exactly as many as there is room for."""
    settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT = 3
    agent = AgentFactory.create(name="bot", owner=owner)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def enqueue() -> None:
        try:
            barrier.wait()
            turn = services.execution_create(
                agent=agent, message="hi", trigger=Trigger.API, queued=True
            )
            services.execution_admit(execution=turn, record_refusal=False)
            outcomes.append("admitted")
        except TooManyTurns:
            outcomes.append("refused")
        finally:
            connection.close()

    for _ in range(5):
        Execution.objects.filter(agent=agent).delete()
        outcomes.clear()
        threads = [threading.Thread(target=enqueue) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["admitted"] * 3 + ["refused"] * 5
        assert Execution.objects.filter(agent=agent, status=Status.QUEUED).count() == 3


@pytest.mark.django_db
def test_a_scheduled_turn_that_hits_the_cap_is_recorded_as_refused_not_lost(
    bot: Agent, settings: Any, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    settings.TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT = 1
    schedule = schedules.schedule_create(
        agent=bot, name="nightly", cron="0 3 * * *", message="tidy", now=T0
    )
    in_flight(bot, 1, Status.RUNNING)
    due = schedule.next_fire_at
    assert due is not None

    with (
        mock.patch("execution.tasks.run_turn.delay") as handed_over,
        django_capture_on_commit_callbacks(execute=True),
    ):
        fired = schedules.schedules_fire(now=due)

    refused = Execution.objects.get(schedule=schedule)
    assert fired == 1
    assert (refused.status, refused.error_code, refused.trigger) == (
        Status.FAILED,
        "too_many_turns",
        Trigger.SCHEDULE,
    )
    assert "cap of 1" in refused.error_detail
    handed_over.assert_not_called()  # no worker runs a refused turn
    schedule.refresh_from_db()
    assert schedule.next_fire_at == due + timedelta(days=1)  # it fires again next time


# --- the settings fail loudly --------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TRINITY_MAX_AGENTS_PER_OPERATOR", "many"),
        ("TRINITY_MAX_AGENTS_PER_OPERATOR", "0"),
        ("TRINITY_MAX_SCHEDULES_PER_AGENT", "-1"),
        ("TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS", "30"),  # under cron's own minute
        ("TRINITY_SCHEDULE_MESSAGE_MAX_CHARS", "1e6"),
        ("TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT", "0"),
        ("TRINITY_WEBHOOK_ALLOW", "10.0.0.0/8,not a host!"),
    ],
)
def test_a_bad_quota_or_webhook_setting_stops_startup_naming_it(
    tmp_path: Any, variable: str, value: str
) -> None:
    from tests.trinity.test_settings_env import _boot

    result = _boot(tmp_path, **{variable: value})
    assert result.returncode != 0
    assert variable in result.stderr
