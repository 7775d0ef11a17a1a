"""Placement's rule as tables: which plan an agent moves to at a turn boundary while
nothing refuses (``subscriptions/headroom/placement.py``): expiring first, then
balanced past the hysteresis."""

from __future__ import annotations

from datetime import timedelta

import pytest

from routing.headroom.placement import (
    DWELL,
    placeable,
    placement_pick,
    settled,
    standing_of,
)
from routing.headroom.reading import Reading, ReadingStatus
from tests.headroom.readings import T0, limited, reading, window

FRESH = timedelta(hours=1)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def pick(assigned: Reading | None, *candidates: Reading | None, family: str | None = None):  # noqa: ANN201
    return placement_pick(
        assigned, list(enumerate(candidates, start=2)), now=T0, max_age=FRESH, family=family
    )


# Expiring first


def test_the_plan_whose_weekly_headroom_expires_soonest_takes_the_agent() -> None:
    here = reading(seven_day_resets_in=5 * DAY)
    later = reading(seven_day_resets_in=3 * DAY)  # not expiring within 48 h
    soonest = reading(seven_day_resets_in=1 * DAY)

    assert pick(here, later, soonest) == 3


@pytest.mark.parametrize(
    ("gap", "moves"), [(12 * HOUR - timedelta(seconds=1), False), (12 * HOUR, True)]
)
def test_only_a_reset_clearly_sooner_moves_the_agent(gap: timedelta, moves: bool) -> None:
    # Both expire within 48 h and score alike on balance: only the margin decides.
    here = reading(seven_day_resets_in=40 * HOUR)
    other = reading(seven_day_resets_in=40 * HOUR - gap)

    assert pick(here, other) == (2 if moves else None)


@pytest.mark.parametrize(
    ("candidate", "why"),
    [
        (reading(seven_day=90.1, seven_day_resets_in=DAY), "under the weekly floor"),
        (reading(five_hour=70.1, seven_day_resets_in=DAY), "under the 5-hour reserve"),
        (limited(resets_in=HOUR), "refusing"),
        (reading(seven_day_resets_in=DAY, age=2 * HOUR), "stale"),
        (reading(seven_day_resets_in=DAY, status=ReadingStatus.ERROR), "no answer"),
        (None, "no reading"),
    ],
)
def test_a_plan_that_could_not_take_the_agent_is_not_a_target(
    candidate: Reading | None, why: str
) -> None:
    here = reading(seven_day_resets_in=5 * DAY)

    assert pick(here, candidate) is None, why


def test_an_old_5_hour_figure_is_no_reserve() -> None:
    old = reading(seven_day_resets_in=DAY, age=timedelta(minutes=31))
    standing = standing_of(old, now=T0, max_age=FRESH, family=None)
    assert standing is not None and standing.five_hour_left == 0.0


def test_a_plan_whose_window_reset_since_its_reading_waits_to_be_read_again() -> None:
    here = reading(seven_day_resets_in=5 * DAY)
    reset = reading(
        five_hour=95.0,
        five_hour_resets_in=-timedelta(minutes=1),
        seven_day_resets_in=DAY,
        age=timedelta(minutes=10),
    )

    assert pick(here, reset) is None  # its figures describe the window that ended
    assert pick(here, reading(seven_day_resets_in=DAY, age=timedelta(minutes=10))) == 2


def test_an_assignment_without_a_measure_stays() -> None:
    assert pick(None, reading(seven_day_resets_in=DAY)) is None
    stale = reading(seven_day_resets_in=5 * DAY, age=2 * HOUR)
    assert pick(stale, reading(seven_day_resets_in=DAY)) is None


def test_ties_go_to_more_headroom_then_rank_order() -> None:
    here = reading(seven_day_resets_in=5 * DAY)
    less = reading(seven_day=60.0, seven_day_resets_in=DAY)
    more = reading(seven_day=20.0, seven_day_resets_in=DAY)

    assert pick(here, less, more) == 3
    assert pick(here, more, more) == 2


def test_the_turns_family_window_decides_when_it_is_fuller() -> None:
    family = "seven_day_opus"
    # Its opus window is fuller than the weekly one and resets later: that is what binds.
    here = reading(
        seven_day=10.0,
        seven_day_resets_in=DAY,
        extra={family: window(80.0, resets_in=6 * DAY)},
    )
    other = reading(seven_day_resets_in=2 * DAY)

    assert pick(here, other, family=family) == 2
    assert pick(here, other) is None  # a Sonnet turn is bound by the weekly window
    standing = standing_of(here, now=T0, max_age=FRESH, family=family)
    assert standing is not None and standing.weekly_left == pytest.approx(20.0)


# Balanced past the hysteresis


def test_otherwise_the_best_balanced_plan_takes_the_agent_past_the_margin() -> None:
    # Nothing expires within 48 h. Here the 5-hour window is nearly spent (10 % left,
    # 4 h to run: 12.5); the others are on pace (a whole 5-hour window, 80 % of a week
    # with 5 days to run: 112), the second a little better still.
    here = reading(five_hour=90.0, five_hour_resets_in=4 * HOUR, seven_day_resets_in=5 * DAY)
    good = reading(seven_day_resets_in=5 * DAY)
    better = reading(five_hour=0.0, seven_day=10.0, seven_day_resets_in=5 * DAY)

    assert pick(here, good, better) == 3
    # Two plans on the same pace: no move (not strictly more than 20 % better).
    assert pick(good, reading(seven_day_resets_in=5 * DAY)) is None


def test_placeable_means_a_measured_assignment() -> None:
    assert placeable(reading(), now=T0, max_age=FRESH, family=None)
    assert not placeable(limited(), now=T0, max_age=FRESH, family=None)
    assert not placeable(None, now=T0, max_age=FRESH, family=None)


def test_an_agent_settles_after_the_dwell() -> None:
    assert settled(None, now=T0)
    assert not settled(T0 - DWELL + timedelta(seconds=1), now=T0)
    assert settled(T0 - DWELL, now=T0)
