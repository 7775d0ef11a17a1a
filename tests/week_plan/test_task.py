"""The planning task: gather, solve, store once at a time; a failure keeps the last
plan; a change asks for a new plan once per burst."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache

from agents.models import Agent
from agents.week_plan_store import (
    LAST_KEY,
    planned_key,
    planned_read,
    week_plan_read,
    week_plan_store,
)
from routing.plan_ahead.inputs import WeekInputs
from routing.plan_ahead.week_plan import WeekPlan
from subscriptions.headroom.store import snapshots_write
from subscriptions.services import assignment_commit, subscription_pause_set
from subscriptions.tasks import solve_week_plan
from subscriptions.week_plan import service
from subscriptions.week_plan.service import SOLVE_MARKER, week_plan_solve
from tests.agents.factories import AgentFactory
from tests.headroom.readings import T0, reading
from tests.subscriptions.factories import SubscriptionFactory
from tests.week_plan.factories import planned, turn, week_plan
from trinity.celery import app
from trinity.markers import marker_claim, markers_read

pytestmark = pytest.mark.django_db


def _fleet() -> tuple[list[Any], list[Agent]]:
    plans = [
        SubscriptionFactory.create(name="max-a", plan_type="max-20x"),
        SubscriptionFactory.create(name="max-b", plan_type="max-5x"),
    ]
    snapshots_write(
        {
            plans[0].pk: reading(
                five_hour=30.0, seven_day=80.0, seven_day_resets_in=timedelta(days=5)
            ),
            plans[1].pk: reading(
                five_hour=10.0, seven_day=20.0, seven_day_resets_in=timedelta(hours=20)
            ),
        }
    )
    agents = [AgentFactory.create(name=f"bot-{i}", subscription=plans[0]) for i in range(3)]
    for agent in agents:
        for day in range(1, 15):
            turn(agent, at=T0 - timedelta(days=day, hours=2), tokens=200_000, served_by=plans[0])
    return plans, agents


def test_it_stores_a_plan_with_an_entry_per_agent_and_no_secret(at_t0: object) -> None:
    plans, agents = _fleet()

    report = week_plan_solve(now=T0)

    assert report.status == "solved", report
    assert (report.plans, report.agents) == (2, 3)
    plan = week_plan_read()
    assert plan is not None and plan.made_at == T0
    for agent in agents:
        entry = planned_read(agent.pk)
        assert entry is not None and entry.current(T0)
        assert entry.text().startswith("planned for ")
    stored = json.dumps([cache.get(LAST_KEY), *(cache.get(planned_key(a.pk)) for a in agents)])
    for subscription in plans:
        assert subscription.token is not None
        assert subscription.token.reveal() not in stored
    for agent in agents:
        assert agent.shared_secret.reveal() not in stored


def test_the_task_runs_the_service_under_its_stable_name(at_t0: object) -> None:
    _fleet()

    result = solve_week_plan.apply().get()

    assert result["status"] == "solved"
    assert app.tasks["subscriptions.week_plan_solve"].name == solve_week_plan.name
    entry = app.conf.beat_schedule["week-plan-solve"]
    assert entry["task"] == "subscriptions.week_plan_solve"
    assert entry["schedule"] == 300 and entry["options"]["expires"] <= 300


def test_a_second_run_while_one_holds_the_marker_solves_nothing(at_t0: object) -> None:
    _fleet()
    assert marker_claim(SOLVE_MARKER, ttl=60, value="another worker")

    assert week_plan_solve(now=T0).status == "busy"
    assert week_plan_read() is None


def test_a_run_releases_only_its_own_claim(at_t0: object) -> None:
    _fleet()

    week_plan_solve(now=T0)

    assert markers_read([SOLVE_MARKER]) == {}
    assert week_plan_solve(now=T0 + timedelta(minutes=5)).status == "solved"


def test_a_solver_failure_keeps_the_previous_plan(at_t0: object, caplog: Any) -> None:
    _, agents = _fleet()
    previous = week_plan(planned(agents[0].pk), made_at=T0 - timedelta(minutes=5))
    week_plan_store(previous)

    def broken(inputs: WeekInputs) -> WeekPlan:
        raise RuntimeError("no optimum")

    report = week_plan_solve(now=T0, solver=broken)

    assert report.status == "failed"
    assert week_plan_read() == previous
    assert "planning failed" in caplog.text
    assert markers_read([SOLVE_MARKER]) == {}


def test_with_no_agents_an_empty_plan_says_when_it_looked(at_t0: object) -> None:
    SubscriptionFactory.create(name="max-a")

    assert week_plan_solve(now=T0).status == "solved"

    plan = week_plan_read()
    assert plan is not None and plan.made_at == T0 and plan.placements == ()
    assert plan.status == "empty"


class TestRequests:
    @pytest.fixture
    def sent(self, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        real = app.send_task

        def send_task(name: str, *args: Any, **kwargs: Any) -> Any:
            if name != service.TASK:
                return real(name, *args, **kwargs)
            calls.append({"task": name, **kwargs})
            return None

        monkeypatch.setattr(app, "send_task", send_task)
        return calls

    def test_a_new_plan_asks_for_a_plan_once_per_burst(
        self, sent: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            SubscriptionFactory.create(name="max-a")
        with django_capture_on_commit_callbacks(execute=True):
            AgentFactory.create(name="bot")

        assert sent == [
            {
                "task": "subscriptions.week_plan_solve",
                "countdown": service.DEBOUNCE_SECONDS,
                "expires": service.EVERY_SECONDS,
            }
        ]

    @pytest.mark.parametrize("change", ["pause", "commit", "delete_agent", "delete_plan"])
    def test_a_pause_a_switch_or_a_delete_asks_for_a_plan(
        self, change: str, sent: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
    ) -> None:
        a, b = SubscriptionFactory.create(name="a"), SubscriptionFactory.create(name="b")
        agent = AgentFactory.create(subscription=a)
        cache.clear()  # forget the creations' request
        with django_capture_on_commit_callbacks(execute=True):
            if change == "pause":
                subscription_pause_set(subscription=a, paused=True, actor="admin", now=T0)
            elif change == "commit":
                assignment_commit(
                    agent=agent,
                    expected_subscription_id=a.pk,
                    expected_subscription_name="a",
                    subscription_id=b.pk,
                    subscription_name="b",
                    why={"reason": "placement"},
                    now=T0,
                )
            elif change == "delete_agent":
                agent.delete()
            else:
                b.delete()

        assert len(sent) == 1

    def test_a_process_state_save_asks_for_nothing(
        self, sent: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
    ) -> None:
        agent = AgentFactory.create()
        cache.clear()
        with django_capture_on_commit_callbacks(execute=True):
            agent.process_state = "running"
            agent.save(update_fields=["process_state", "updated_at"])

        assert sent == []
