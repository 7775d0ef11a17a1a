"""Agent schedules: the REST API (validation, the permission trio) and beat's fire,
claimed by compare-and-set so a schedule fires once however many claimers race."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent
from execution.models import Execution, Schedule, Status, Trigger
from execution.schedules import services as schedules
from tests.agents.factories import AgentFactory
from trinity.celery import app

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
URL = "/api/agents/bot/schedules"
BODY = {"name": "nightly", "cron": "0 3 * * *", "message": "tidy up"}


@pytest.fixture
def bot(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


def make(agent: Agent, *, cron: str = "*/5 * * * *", name: str = "every-5", **kw: Any) -> Schedule:
    return schedules.schedule_create(
        agent=agent, name=name, cron=cron, message="check in", now=kw.pop("now", T0), **kw
    )


# The API


@time_machine.travel(T0, tick=False)
def test_the_owner_creates_a_schedule_that_fires_at_its_next_cron_instant(
    bot: Agent, owner_client: APIClient
) -> None:
    response = owner_client.post(URL, BODY, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["cron"], body["enabled"], body["agent"]) == (
        "nightly",
        "0 3 * * *",
        True,
        "bot",
    )
    assert body["next_fire_at"] == "2026-06-02T03:00:00Z"
    assert owner_client.get(URL).json() == [body]
    assert owner_client.get(f"{URL}/nightly").json() == body


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("* * * *", "5 cron fields"),
        ("0 0 * * * *", "5 cron fields"),
        ("61 * * * *", "not a valid cron"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_a_bad_cron_expression_is_a_400_naming_the_field_and_nothing_is_written(
    bot: Agent, owner_client: APIClient, cron: str, says: str
) -> None:
    response = owner_client.post(URL, {**BODY, "cron": cron}, format="json")

    assert response.status_code == 400
    assert says in response.json()["cron"][0]
    assert not Schedule.objects.exists()


def test_a_second_schedule_of_the_same_name_is_a_409(bot: Agent, owner_client: APIClient) -> None:
    assert owner_client.post(URL, BODY, format="json").status_code == 201
    again = owner_client.post(URL, BODY, format="json")
    assert again.status_code == 409, again.content
    assert Schedule.objects.count() == 1


def test_a_bad_cron_in_a_patch_is_a_400_and_the_schedule_is_unchanged(
    bot: Agent, owner_client: APIClient
) -> None:
    make(bot, name="nightly", cron="0 3 * * *")
    response = owner_client.patch(f"{URL}/nightly", {"cron": "not cron"}, format="json")
    assert response.status_code == 400 and "cron" in response.json()
    assert Schedule.objects.get().cron == "0 3 * * *"


def test_disabling_clears_the_next_fire_and_re_enabling_starts_after_now(
    bot: Agent, owner_client: APIClient
) -> None:
    make(bot)
    with time_machine.travel(T0 + timedelta(minutes=1), tick=False):
        off = owner_client.patch(f"{URL}/every-5", {"enabled": False}, format="json").json()
    assert (off["enabled"], off["next_fire_at"]) == (False, None)
    # Switched back on an hour later, it does not catch up on the hour it missed.
    with time_machine.travel(T0 + timedelta(hours=1, minutes=2), tick=False):
        on = owner_client.patch(f"{URL}/every-5", {"enabled": True}, format="json").json()
    assert on["next_fire_at"] == "2026-06-01T13:05:00Z"


def test_changing_the_expression_reschedules_and_a_message_change_does_not(
    bot: Agent, owner_client: APIClient
) -> None:
    make(bot)
    with time_machine.travel(T0 + timedelta(minutes=1), tick=False):
        same = owner_client.patch(f"{URL}/every-5", {"message": "new"}, format="json").json()
        assert (same["message"], same["next_fire_at"]) == ("new", "2026-06-01T12:05:00Z")
        moved = owner_client.patch(f"{URL}/every-5", {"cron": "0 * * * *"}, format="json")
    assert moved.json()["next_fire_at"] == "2026-06-01T13:00:00Z"


@pytest.mark.parametrize(
    ("client_name", "sees"),
    [("owner_client", True), ("other_client", False), ("admin_client_api", True)],
)
def test_only_the_owner_and_an_admin_see_and_change_an_agents_schedules(
    bot: Agent, request: pytest.FixtureRequest, client_name: str, sees: bool
) -> None:
    make(bot, name="nightly", cron="0 3 * * *")
    client: APIClient = request.getfixturevalue(client_name)
    expected = 200 if sees else 404

    assert client.get(URL).status_code == expected
    assert client.get(f"{URL}/nightly").status_code == expected
    created = client.post(URL, {**BODY, "name": "other"}, format="json")
    assert created.status_code == (201 if sees else 404)
    patched = client.patch(f"{URL}/nightly", {"enabled": False}, format="json")
    assert patched.status_code == expected
    assert Schedule.objects.get(name="nightly").enabled is not sees
    assert client.delete(f"{URL}/nightly").status_code == (204 if sees else 404)
    assert Schedule.objects.filter(name="nightly").exists() is not sees


def test_anonymous_callers_are_refused(bot: Agent, anon_client: APIClient) -> None:
    assert anon_client.get(URL).status_code in (401, 403)
    assert anon_client.post(URL, BODY, format="json").status_code in (401, 403)
    assert not Schedule.objects.exists()


def test_an_unknown_schedule_is_a_404(bot: Agent, owner_client: APIClient) -> None:
    assert owner_client.get(f"{URL}/nope").status_code == 404
    assert owner_client.delete(f"{URL}/nope").status_code == 404


# Beat's fire


def test_a_due_schedule_fires_one_queued_schedule_turn_and_enqueues_it(
    bot: Agent, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    schedule = make(bot, model="claude-opus-4-1")
    not_yet = make(bot, name="hourly", cron="0 * * * *")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        fired = schedules.schedules_fire(now=T0 + timedelta(minutes=5))

    assert fired == 1
    turn = Execution.objects.get()
    assert (turn.trigger, turn.status, turn.schedule_id, turn.message, turn.model) == (
        Trigger.SCHEDULE,
        Status.QUEUED,
        schedule.pk,
        "check in",
        "claude-opus-4-1",
    )
    assert turn.autonomous
    assert len(callbacks) == 1  # the worker's run_turn, sent once the row is committed
    schedule.refresh_from_db()
    assert schedule.last_fired_at == T0 + timedelta(minutes=5)
    assert schedule.next_fire_at == T0 + timedelta(minutes=10)
    not_yet.refresh_from_db()
    assert not_yet.next_fire_at == T0 + timedelta(hours=1) and not_yet.last_fired_at is None


def test_nothing_fires_before_the_instant_and_the_instant_itself_fires(bot: Agent) -> None:
    make(bot)
    assert schedules.schedules_fire(now=T0 + timedelta(minutes=5) - timedelta(seconds=1)) == 0
    assert schedules.schedules_fire(now=T0 + timedelta(minutes=5)) == 1
    # The same minute's second sweep finds nothing due.
    assert schedules.schedules_fire(now=T0 + timedelta(minutes=5, seconds=30)) == 0
    assert Execution.objects.count() == 1


def test_a_disabled_schedule_never_fires(bot: Agent) -> None:
    make(bot, enabled=False)
    assert schedules.schedules_fire(now=T0 + timedelta(days=1)) == 0
    assert not Execution.objects.exists()


def test_after_an_hour_without_beat_a_schedule_fires_once_not_once_per_missed_period(
    bot: Agent,
) -> None:
    schedule = make(bot)
    back = T0 + timedelta(hours=1, minutes=2)

    assert schedules.schedules_fire(now=back) == 1

    assert Execution.objects.count() == 1
    schedule.refresh_from_db()
    assert schedule.next_fire_at == T0 + timedelta(hours=1, minutes=5)
    assert schedules.schedules_fire(now=back) == 0


def test_a_claimer_holding_a_stale_due_instant_fires_nothing(bot: Agent) -> None:
    make(bot)
    first = Schedule.objects.select_related("agent").get()
    stale = Schedule.objects.select_related("agent").get()
    now = T0 + timedelta(minutes=5)

    assert schedules._schedule_fire(schedule=first, now=now) is True
    assert schedules._schedule_fire(schedule=stale, now=now) is False
    assert Execution.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_fires_once_when_two_beats_race_for_the_same_schedules(owner: User) -> None:
    agent = AgentFactory.create(name="bot", owner=owner)
    for n in range(10):
        make(agent, name=f"s{n}")
    now = T0 + timedelta(minutes=5)
    barrier = threading.Barrier(2)
    fired: list[int] = []

    def beat() -> None:
        try:
            barrier.wait(timeout=10)
            fired.append(schedules.schedules_fire(now=now))
        finally:
            connection.close()

    # Each sent run_turn would run the turn; the broker only has to hold it here.
    app.conf.task_always_eager = False
    threads = [threading.Thread(target=beat) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sum(fired) == 10, fired
    assert Execution.objects.filter(trigger=Trigger.SCHEDULE).count() == 10
    assert sorted(Execution.objects.values_list("schedule__name", flat=True)) == sorted(
        f"s{n}" for n in range(10)
    )


def test_deleting_a_schedule_keeps_the_turns_it_fired(bot: Agent, owner_client: APIClient) -> None:
    make(bot)
    schedules.schedules_fire(now=T0 + timedelta(minutes=5))
    assert owner_client.delete(f"{URL}/every-5").status_code == 204
    turn = Execution.objects.get()
    assert turn.schedule_id is None and turn.trigger == Trigger.SCHEDULE


def test_the_beat_entries_fire_schedules_and_resend_parked_turns_every_minute() -> None:
    app.loader.import_default_modules()
    for entry_name, task_name in (
        ("fire-schedules", "execution.fire_schedules"),
        ("resend-parked-turns", "execution.resend_parked_turns"),
    ):
        entry = app.conf.beat_schedule[entry_name]
        assert (entry["task"], entry["schedule"], entry["options"]["expires"]) == (
            task_name,
            60,
            60,
        )
        assert task_name in app.tasks
    assert "execution.run_parked_turn" in app.tasks
