"""A turn that would start on a plan forecast to run out before it ends starts on
another plan: end to end through the REST API, a real agent server running the real
Claude Code CLI, the simulator, and forecasts the real sampler computed from the
simulator's readings. Which credential served is read from the simulator's log."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from routing.eligibility import Admitted
from routing.facts import TurnFacts
from routing.headroom.exhaustion_forecast import Forecast, WindowForecast
from simulator.control import SimulatorControl
from subscriptions.headroom.sampler import headroom_refresh
from subscriptions.headroom.store import TurnEvidence, turn_evidence_read
from subscriptions.models import RateLimitEvent, Subscription
from subscriptions.plan_facts import with_settings
from tests.execution.support import agent_on, messages_sent, register_plan, task
from tests.headroom.readings import T0
from tests.routing.verdicts import assignment_verdict
from trinity import clock

MIN = timedelta(minutes=1)


def burn(control: SimulatorControl, plan: Subscription, token: str, steps: list[float]) -> None:
    """Sample ``plan`` every 10 minutes up to now while its 5h window climbs through
    ``steps`` (percent): the simulator's clock and the probes' instants move together,
    so the window's period starts with the first step, as a real one would."""
    now = clock.now()
    start = now - (len(steps) - 1) * 10 * MIN
    for i, percent in enumerate(steps):
        instant = start + i * 10 * MIN
        control.set_clock(instant)
        control.set_usage(token, "five_hour", percent=percent)
        headroom_refresh(subscription=plan, now=instant)
    control.use_real_clock()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
class TestTurn:
    def test_a_plan_forecast_to_run_out_mid_turn_is_routed_around_before_the_first_attempt(
        self, control: SimulatorControl, owner: User, owner_client: APIClient
    ) -> None:
        a, a_token = register_plan(control, "plan-a")
        register_plan(control, "plan-b")
        agent_on(owner, a)
        # 1.7 points a minute, 6 left: out in about 3.5 minutes, inside a 5-minute turn.
        burn(control, a, a_token, [60, 77, 94])
        forecast = turn_evidence_read(a.pk).forecast
        assert forecast is not None and "five_hour" in forecast.windows
        control.clear_requests()

        body = task(owner_client)

        assert body["http_status"] == 200, body
        assert messages_sent(control) == [("plan-b", 200)]  # plan-a was never sent
        assert body["attempts"][0]["why"] == "pre_dispatch"
        assert body["served_by_subscription"]["name"] == "plan-b"
        assert not RateLimitEvent.objects.exists()  # nothing refused

    def test_a_plan_with_more_than_a_turn_left_at_its_rate_serves_as_assigned(
        self, control: SimulatorControl, owner: User, owner_client: APIClient
    ) -> None:
        a, a_token = register_plan(control, "plan-a")
        register_plan(control, "plan-b")
        agent_on(owner, a)
        # 0.2 points a minute, 36 left: three hours away.
        burn(control, a, a_token, [60, 62, 64])
        forecast = turn_evidence_read(a.pk).forecast
        assert forecast is not None and "five_hour" in forecast.windows
        control.clear_requests()

        body = task(owner_client)

        assert body["http_status"] == 200, body
        assert messages_sent(control) == [("plan-a", 200)]
        assert body["attempts"][0]["why"] == "assigned"

    def test_with_every_alternative_running_out_too_the_turn_dispatches_as_assigned(
        self, control: SimulatorControl, owner: User, owner_client: APIClient
    ) -> None:
        a, a_token = register_plan(control, "plan-a")
        b, b_token = register_plan(control, "plan-b")
        agent_on(owner, a)
        burn(control, b, b_token, [60, 77, 94])
        burn(control, a, a_token, [60, 77, 94])
        control.clear_requests()

        body = task(owner_client)

        # A forecast is a likelihood: the plan still serves now, so the turn runs on it
        # rather than moving to a plan as close to empty (or billing the key).
        assert body["http_status"] == 200, body
        assert messages_sent(control) == [("plan-a", 200)]
        assert body["attempts"][0]["why"] == "assigned"


# The pre-dispatch question on its own (no processes).


def _running_out_in(minutes: float) -> TurnEvidence:
    return TurnEvidence(
        reachable=True,
        forecast=Forecast(
            computed_at=T0,
            windows={
                "five_hour": WindowForecast(
                    exhausts_at=T0 + minutes * MIN, burn_per_hour=20.0, resets_at=T0 + 4 * 60 * MIN
                )
            },
        ),
    )


@pytest.mark.parametrize(
    ("evidence", "expected_turn", "exhausted"),
    [
        (_running_out_in(3), 5 * MIN, True),
        (_running_out_in(5), 5 * MIN, False),  # exactly at the turn's end: not before it
        (_running_out_in(3), 3 * MIN, False),
        (_running_out_in(3), timedelta(0), False),  # forecast routing off
        (TurnEvidence(reachable=False), 5 * MIN, False),
        (TurnEvidence(reachable=True), 5 * MIN, False),  # no forecast stored
    ],
)
def test_the_assigned_plan_is_forecast_exhausted_only_before_the_turn_would_end(
    evidence: TurnEvidence, expected_turn: timedelta, exhausted: bool
) -> None:
    verdict = assignment_verdict(evidence, now=T0, expected_turn=expected_turn)
    assert isinstance(verdict, Admitted) and verdict.forecast_out is exhausted


@pytest.mark.parametrize(
    ("setting", "budget_left", "expected"),
    [
        (300, 600 * 1.0, 300),
        (300, 300 * 1.0, 300),
        (300, 120 * 1.0, 120),  # a turn cannot outlive its own budget
        (300, -5.0, 0),
        (0, 600 * 1.0, 0),
    ],
)
def test_the_expected_turn_is_the_setting_capped_by_the_budget(
    settings: Settings, setting: int, budget_left: float, expected: int
) -> None:
    settings.TRINITY_FORECAST_TURN_SECONDS = setting
    turn = with_settings(
        TurnFacts(
            provider="anthropic",
            autonomous=False,
            created_at=T0,
            budget_end=T0 + timedelta(seconds=budget_left),
        )
    )
    assert turn.expected_turn(T0) == timedelta(seconds=expected)
