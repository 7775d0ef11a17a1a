"""The fleet simulation's provider model: window accounting, reset instants, capacity.

The windows are the simulator's (``simulator.state``), anchored at their phase; the
readings are the real collector's over the simulator's usage body.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import httpx
import pytest
from starlette.testclient import TestClient

from bench.fleet.trace import AgentSpec, Fleet, SubscriptionSpec, WindowSpec
from bench.fleet.world import PhasedWindow, World, from_unix
from routing.attempt_refusal import classify_attempt_refusal
from routing.headroom.reading import ReadingStatus
from routing.rung import RungKind
from simulator.app import create_app
from subscriptions.headroom.collectors import anthropic
from trinity.crypto import Secret

START = datetime(2030, 1, 7, tzinfo=UTC)
FIVE_HOURS = timedelta(hours=5)
SONNET = "claude-sonnet-4-5"
HAIKU = "claude-haiku-4-5"


def plan(
    name: str = "a",
    *,
    five_hour: int = 1_000,
    five_reset: timedelta = timedelta(hours=2),
    five_used: int = 0,
    seven_day: int = 10_000,
    seven_reset: timedelta = timedelta(days=3),
    sonnet: int = 10_000,
    revoked_at: datetime | None = None,
) -> SubscriptionSpec:
    weekly = START + seven_reset
    return SubscriptionSpec(
        name=name,
        plan_type="pro",
        windows={
            "five_hour": WindowSpec(five_hour, START + five_reset, five_used),
            "seven_day": WindowSpec(seven_day, weekly, 0),
            "seven_day_sonnet": WindowSpec(sonnet, weekly, 0),
            "seven_day_opus": WindowSpec(10_000, weekly, 0),
        },
        revoked_at=revoked_at,
    )


def world(*plans: SubscriptionSpec) -> World:
    fleet = Fleet(
        name="t",
        start=START,
        end=START + timedelta(days=7),
        subscriptions=plans or (plan(),),
        agents=(AgentSpec("x", SONNET, "a"),),
    )
    return World(fleet)


def attempt(w: World, tokens: int, at: timedelta, model: str = HAIKU, plan_id: int = 1):
    return w.attempt(w.subscriptions[plan_id].rung, model=model, tokens=tokens, at=START + at)


def test_a_served_turn_counts_against_every_window_it_applies_to():
    w = world()
    assert attempt(w, 300, timedelta(minutes=1), model=SONNET).ok
    windows = w.subscriptions[1].credential.windows
    assert {name: win.used for name, win in windows.items()} == {
        "five_hour": 300,
        "seven_day": 300,
        "seven_day_sonnet": 300,
        "seven_day_opus": 0,
    }


def test_it_serves_while_under_capacity_and_counts_the_crossing_request_whole():
    w = world()
    assert attempt(w, 999, timedelta(minutes=1)).ok
    # 999 < 1,000: still served, and all of it counts (the provider's rule).
    assert attempt(w, 500, timedelta(minutes=2)).ok
    assert w.subscriptions[1].credential.windows["five_hour"].used == 1_499
    refused = attempt(w, 10, timedelta(minutes=3))
    assert not refused.ok
    assert classify_attempt_refusal(
        error_code=refused.error_code, detail=refused.detail
    ).failure_kind == ("rate_limit")
    # The refusal carries the binding window's reset, as the agent server reports it.
    assert refused.resets_at == START + timedelta(hours=2)


def test_the_window_resets_at_its_phase_and_records_what_went_unused():
    w = world(plan(five_used=400))
    assert attempt(w, 700, timedelta(hours=1, minutes=59)).ok  # 400 < 1,000
    assert not attempt(w, 1, timedelta(hours=1, minutes=59, seconds=30)).ok
    # At the reset instant itself the new window is in force.
    assert attempt(w, 1, timedelta(hours=2)).ok
    w.flush(START + timedelta(hours=2) + 2 * FIVE_HOURS)
    window = w.subscriptions[1].credential.windows["five_hour"]
    assert isinstance(window, PhasedWindow)
    resets = [(from_unix(r.at) - START, r.used, r.unused) for r in window.resets]
    assert resets == [
        (timedelta(hours=2), 1_100, 0),
        # The next windows follow every five hours from the phase, touched or not.
        (timedelta(hours=7), 1, 999),
        (timedelta(hours=12), 0, 1_000),
    ]


def test_a_window_already_full_at_the_start_refuses_until_its_reset():
    w = world(plan(five_used=1_000))
    assert not attempt(w, 1, timedelta(minutes=5)).ok
    assert attempt(w, 1, timedelta(hours=2)).ok


def test_the_weekly_window_binds_across_five_hour_resets():
    w = world(plan(five_hour=1_000, seven_day=1_500))
    assert attempt(w, 1_000, timedelta(minutes=1)).ok
    assert attempt(w, 400, timedelta(hours=2, minutes=1)).ok
    assert attempt(w, 200, timedelta(hours=2, minutes=2)).ok  # 1,400 < 1,500
    refused = attempt(w, 1, timedelta(hours=7, minutes=1))
    assert not refused.ok
    assert refused.resets_at == START + timedelta(days=3)


def test_a_revoked_plan_refuses_every_request_with_an_auth_refusal():
    w = world(plan(revoked_at=START + timedelta(hours=1)))
    w.revoke("a", START + timedelta(hours=1))
    refused = attempt(w, 1, timedelta(hours=1, minutes=1))
    assert not refused.ok
    refusal = classify_attempt_refusal(error_code=refused.error_code, detail=refused.detail)
    assert (refusal.failure_kind, refusal.reason) == ("auth", "auth")
    assert w.reading(1, START + timedelta(hours=2)).status is ReadingStatus.INVALID_TOKEN


def test_the_key_serves_whatever_the_plans_say():
    w = world(plan(five_used=1_000))
    served = w.attempt(w.key_rung, model=HAIKU, tokens=5_000, at=START)
    assert served.ok and w.key_rung.kind is RungKind.API_KEY
    assert served.override_echo == "api_key"


@pytest.mark.parametrize("revoked", [False, True])
def test_the_reading_is_the_collectors_reading_of_the_simulators_own_usage_endpoint(
    revoked: bool, settings
):
    """The usage body built in process equals what the simulator's app serves, and
    the collector reads both the same way."""
    w = world(plan(five_used=250))
    attempt(w, 600, timedelta(minutes=10), model=SONNET)
    at = START + timedelta(minutes=20)
    if revoked:
        w.revoke("a", at)
    settings.TRINITY_ANTHROPIC_BASE_URL = "http://testserver"
    token = Secret(f"sk-ant-oat01-fleet-bench-{1:03d}")
    w.now(at)
    with TestClient(create_app(w.sim)) as client:
        # starlette's TestClient is an httpx.Client over the ASGI app, in process.
        over_http = anthropic.read(token=token, client=cast(httpx.Client, client), now=at).reading
    assert w.reading(1, at) == over_http
    if not revoked:
        assert over_http.utilization("five_hour") == 85.0
        assert over_http.windows["seven_day"].resets_at == START + timedelta(days=3)


def test_under_the_simulators_rule_a_window_starts_at_its_first_request():
    """``World(phased=False)``: the next window starts at the first request after a
    reset, not at the phase; its resets are recorded all the same."""
    fleet = Fleet(
        name="t",
        start=START,
        end=START + timedelta(days=7),
        subscriptions=(plan(five_used=400),),
        agents=(AgentSpec("x", SONNET, "a"),),
    )
    w = World(fleet, phased=False)
    assert attempt(w, 700, timedelta(hours=1)).ok
    # The window in force at the start still resets at its phase (+2 h)...
    assert attempt(w, 10, timedelta(hours=3)).ok  # ...and this request starts the next
    assert attempt(w, 10, timedelta(hours=7, minutes=30)).ok  # phased, it would reset at +7 h
    assert w.reading(1, START + timedelta(hours=7, minutes=40)).windows[
        "five_hour"
    ].resets_at == START + timedelta(hours=8)
    w.flush(START + timedelta(hours=9))
    resets = [(from_unix(r.at) - START, r.used) for r in w.resets() if r.window == "five_hour"]
    assert resets == [(timedelta(hours=2), 1_100), (timedelta(hours=8), 20)]
