"""The sampler computes each plan's exhaustion forecast where it stores a reading, and
keeps it in the cache where the turn's one pre-dispatch read finds it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.core.cache import cache

from routing.headroom.exhaustion_forecast import forecast_key
from routing.headroom.reading import Reading, ReadingStatus
from simulator.control import SimulatorControl
from subscriptions.headroom.forecast_store import headroom_forecasts_read
from subscriptions.headroom.sampler import headroom_readings_record, headroom_sweep
from subscriptions.headroom.store import snapshot_read, turn_evidence_read
from subscriptions.models import Subscription
from tests.headroom.factories import plan_on
from tests.headroom.readings import T0

pytestmark = pytest.mark.django_db(transaction=True)
MIN = timedelta(minutes=1)


def at(instant: datetime) -> Callable[[], datetime]:
    return lambda: instant


def token(subscription: Subscription) -> str:
    assert subscription.token is not None
    return subscription.token.reveal()


def sweep_with_usage(sim: SimulatorControl, plan: Subscription, steps: list[float]) -> None:
    """Sweep every 10 minutes from T0 while the plan's 5h window is at each step's %."""
    for i, percent in enumerate(steps):
        instant = T0 + i * 10 * MIN
        sim.set_clock(instant)
        sim.set_usage(token(plan), "five_hour", percent=percent)
        assert headroom_sweep(clock=at(instant)).probed == 1


def test_a_sweep_stores_the_forecast_of_a_burning_window_with_the_snapshot(
    sim: SimulatorControl,
) -> None:
    plan = plan_on(sim, five_hour=40)
    sweep_with_usage(sim, plan, [40, 50, 60])  # 1 point a minute

    evidence = turn_evidence_read(plan.pk)

    assert evidence.reading is not None and evidence.forecast is not None
    assert evidence.forecast.computed_at == T0 + 20 * MIN
    five_hour = evidence.forecast.windows["five_hour"]
    # 40 points left at 1 a minute from the reading at T0+20m (the probe's own token
    # may nudge the figure by a tenth).
    assert abs(five_hour.exhausts_at - (T0 + 60 * MIN)) < MIN
    assert five_hour.burn_per_hour == pytest.approx(60.0, abs=1.0)
    assert five_hour.resets_at == evidence.reading.windows["five_hour"].resets_at
    assert "seven_day" not in evidence.forecast.windows  # not burning this hour
    # The panel's read sees the same forecast.
    assert headroom_forecasts_read([plan.pk]) == {plan.pk: evidence.forecast}


def test_a_window_that_stopped_burning_replaces_the_old_forecast_with_none(
    sim: SimulatorControl,
) -> None:
    plan = plan_on(sim, five_hour=40)
    sweep_with_usage(sim, plan, [40, 50, 60])
    assert turn_evidence_read(plan.pk).forecast is not None
    # Idle for the next hour: six readings at 60%, and the rising ones age out.
    for i in range(3, 10):
        instant = T0 + i * 10 * MIN
        sim.set_clock(instant)
        assert headroom_sweep(clock=at(instant)).probed == 1

    forecast = turn_evidence_read(plan.pk).forecast

    assert forecast is not None and forecast.computed_at == T0 + 90 * MIN
    assert forecast.windows == {}


def test_an_error_reading_leaves_the_stored_forecast_alone(sim: SimulatorControl) -> None:
    plan = plan_on(sim, five_hour=40)
    sweep_with_usage(sim, plan, [40, 50, 60])
    before = turn_evidence_read(plan.pk).forecast
    assert before is not None and "five_hour" in before.windows
    failed = Reading(fetched_at=T0 + 25 * MIN, status=ReadingStatus.ERROR, detail="timeout")

    headroom_readings_record(
        readings={plan.pk: failed},
        previous=snapshot_read(plan.pk),
        names={plan.pk: plan.name},
        now=failed.fetched_at,
        threshold=0,
    )

    assert turn_evidence_read(plan.pk).forecast == before


def test_a_malformed_forecast_is_no_forecast_and_keeps_the_reading(
    sim: SimulatorControl,
) -> None:
    plan = plan_on(sim, five_hour=40)
    sweep_with_usage(sim, plan, [40])
    cache.set(forecast_key(plan.pk), {"computed_at": "yesterday"})

    evidence = turn_evidence_read(plan.pk)

    assert evidence.reading is not None and evidence.forecast is None
    assert headroom_forecasts_read([plan.pk]) == {}


def test_a_single_reading_stores_a_forecast_with_no_window(sim: SimulatorControl) -> None:
    plan = plan_on(sim, five_hour=40)
    sweep_with_usage(sim, plan, [40])

    forecast = turn_evidence_read(plan.pk).forecast

    assert forecast is not None and forecast.windows == {}
