"""Table tests for the balanced (reset-aware) strategy and its hysteresis, boundaries
included: pace clamped at 0.05 and 1, a reset a microsecond away, exactly 2 % and 5 %
remaining, exactly 20 % better."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from routing.eligibility import Admission, Candidate
from routing.headroom.balance import (
    Balance,
    admitted,
    balance_of,
    incumbent_holds,
)
from routing.headroom.classification import Tier
from routing.headroom.hysteresis import Move, hysteresis_move
from routing.headroom.ranking import BALANCED, rank_candidates
from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.rebalance_plan import rebalance_plan
from routing.headroom.recovery import Verdict
from tests.headroom.readings import T0, limited, reading, window

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
FIVE_H = 5 * HOUR
WEEK = 7 * DAY
MAX_AGE = HOUR
MICROSECOND = timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("name", "utilization", "time_left", "score"),
    [
        ("five_hour", 40.0, FIVE_H, 60.0),  # a whole window left: the remaining figure
        ("five_hour", 40.0, 2 * FIVE_H, 60.0),  # more than a window (clock skew): clamped at 1
        ("five_hour", 40.0, FIVE_H / 2, 120.0),  # half the window left: worth twice
        ("five_hour", 40.0, FIVE_H * 0.05, 1200.0),  # exactly the floor
        ("five_hour", 40.0, FIVE_H * 0.01, 1200.0),  # below the floor: clamped at 0.05
        ("five_hour", 40.0, MICROSECOND, 1200.0),  # a microsecond before its reset: clamped
        ("five_hour", 100.0, HOUR, 0.0),  # spent is spent, however soon it resets
        ("seven_day", 30.0, 3.5 * DAY, 140.0),  # the weekly window, half left
        ("seven_day", 30.0, None, 70.0),  # no reset known: a whole window left
        ("seven_day_sonnet", 30.0, 3.5 * DAY, 140.0),  # a family window lasts a week
    ],
)
def test_a_windows_score_is_remaining_over_the_clamped_share_of_time_left(
    name: str, utilization: float, time_left: timedelta | None, score: float
) -> None:
    # Every other deciding window untouched and a minute from its reset (100 left over
    # the 0.05 floor: 2,000), so ``name`` is the tightest and sets the score.
    others = {other: window(0.0, resets_in=MINUTE) for other in ("five_hour", "seven_day")}
    subject = reading(extra={**others, name: window(utilization, resets_in=time_left)})
    family = name if name.startswith("seven_day_") else None
    found = balance_of(subject, now=T0, max_age=MAX_AGE, family=family)
    assert found is not None
    assert found.window == name
    assert found.score == pytest.approx(score)


@pytest.mark.parametrize(
    ("five", "five_left", "seven", "seven_left", "family", "expected"),
    [
        # 5h: 50 left over 0.5 → 100; 7d: 80 left over 1 → 80: the weekly limits.
        (50.0, FIVE_H / 2, 20.0, WEEK, None, Balance(80.0, 50.0, "seven_day")),
        # 5h: 10 left over 1 → 10: the 5h limits and has the least remaining.
        (90.0, FIVE_H, 20.0, WEEK, None, Balance(10.0, 10.0, "five_hour")),
        # 7d: 60 left over 0.05 (an hour to go, clamped) → 1200; 5h 70 left → 70.
        (30.0, FIVE_H, 40.0, HOUR, None, Balance(70.0, 60.0, "five_hour")),
        # The family window (sonnet weekly 95 % used, a full week) limits a sonnet turn...
        (10.0, FIVE_H, 20.0, WEEK, "seven_day_sonnet", Balance(5.0, 5.0, "seven_day_sonnet")),
        # ... and not an opus one.
        (10.0, FIVE_H, 20.0, WEEK, "seven_day_opus", Balance(80.0, 80.0, "seven_day")),
    ],
)
def test_the_tightest_window_sets_the_score_and_the_lowest_remaining_counts(
    five: float,
    five_left: timedelta,
    seven: float,
    seven_left: timedelta,
    family: str | None,
    expected: Balance,
) -> None:
    found = balance_of(
        reading(
            five_hour=five,
            seven_day=seven,
            five_hour_resets_in=five_left,
            seven_day_resets_in=seven_left,
            extra={"seven_day_sonnet": window(95.0, resets_in=WEEK)},
        ),
        now=T0,
        max_age=MAX_AGE,
        family=family,
    )
    assert found is not None
    assert found.score == pytest.approx(expected.score)
    assert found.remaining == pytest.approx(expected.remaining)
    assert found.window == expected.window


def test_a_five_hour_figure_older_than_half_an_hour_does_not_count() -> None:
    old = reading(five_hour=99.0, seven_day=20.0, seven_day_resets_in=WEEK, age=31 * MINUTE)
    found = balance_of(old, now=T0, max_age=MAX_AGE)
    assert found == Balance(80.0, 80.0, "seven_day")
    edge = reading(five_hour=99.0, seven_day=20.0, five_hour_resets_in=FIVE_H, age=30 * MINUTE)
    found = balance_of(edge, now=T0, max_age=MAX_AGE)
    assert found is not None and found.window == "five_hour"


@pytest.mark.parametrize(
    "unmeasured",
    [
        None,
        reading(age=2 * HOUR),  # stale
        limited(),  # refusing
        Reading(fetched_at=T0, status=ReadingStatus.ERROR),
        reading(five_hour_resets_in=timedelta(0)),  # a window that resets at now
    ],
)
def test_only_a_measured_reading_has_a_balance(unmeasured: Reading | None) -> None:
    assert balance_of(unmeasured, now=T0, max_age=MAX_AGE) is None


@pytest.mark.parametrize(
    ("remaining", "holds", "admits"),
    [
        (1.9, False, False),
        (2.0, True, False),  # exactly 2 %: the incumbent stays
        (4.9, True, False),
        (5.0, True, False),  # exactly 5 %: not admitted
        (5.1, True, True),
        (100.0, True, True),
    ],
)
def test_the_incumbent_floor_is_inclusive_and_the_admission_floor_strict(
    remaining: float, holds: bool, admits: bool
) -> None:
    balance = Balance(remaining, remaining, "seven_day")
    assert incumbent_holds(balance) is holds
    assert admitted(balance) is admits


def _b(score: float, remaining: float = 50.0) -> Balance:
    return Balance(score, remaining, "seven_day")


@pytest.mark.parametrize(
    ("incumbent", "challenger", "refusing", "move"),
    [
        (_b(50.0), _b(60.0), False, Move.STAY),  # exactly 20 % better: stays
        (_b(50.0), _b(60.1), False, Move.DISPLACE),  # strictly more
        (_b(100.0), _b(120.0), False, Move.STAY),
        (_b(100.0), _b(120.000001), False, Move.DISPLACE),
        (_b(50.0), _b(500.0, remaining=5.0), False, Move.STAY),  # not admitted at 5 %
        (_b(50.0), _b(500.0, remaining=5.1), False, Move.DISPLACE),
        (_b(2.0, remaining=2.0), _b(2.3, remaining=5.1), False, Move.STAY),  # holds at 2 %
        (_b(1.9, remaining=1.9), _b(2.0, remaining=5.1), False, Move.LEAVE),  # below: leaves
        (_b(1.9, remaining=1.9), _b(9.0, remaining=5.0), False, Move.STAY),  # nowhere to go
        (_b(1.9, remaining=1.9), None, False, Move.STAY),
        (None, _b(90.0), False, Move.STAY),  # no measure of the incumbent: the walk decides
        (None, _b(90.0), True, Move.LEAVE),  # a refusing incumbent leaves
        (_b(80.0), _b(10.0, remaining=6.0), True, Move.LEAVE),
    ],
)
def test_hysteresis_moves_only_past_the_floors_and_the_margin(
    incumbent: Balance | None, challenger: Balance | None, refusing: bool, move: Move
) -> None:
    assert hysteresis_move(incumbent, challenger, incumbent_refusing=refusing) is move


def _c(pk: int, agents: int = 0, failed: object = None) -> Candidate:
    return Candidate(pk, f"plan-{pk}", agents, failed)  # type: ignore[arg-type]


def test_balanced_ranks_admitted_by_score_then_unknown_then_spent() -> None:
    candidates = [_c(1), _c(2), _c(3), _c(4), _c(5), _c(6), _c(7)]
    readings = {
        # 7d 50 % used, resets in a day (pace 1/7): 350; the empty 5h window over a
        # whole 5 h: 100, the tighter. Banded puts it after 2 and 6 (band 5).
        1: reading(
            five_hour=0, seven_day=50.0, five_hour_resets_in=FIVE_H, seven_day_resets_in=DAY
        ),
        # 7d 10 % used, a whole week left: 90.
        2: reading(five_hour=0, seven_day=10.0, seven_day_resets_in=WEEK),
        # 95 % used: exactly 5 % remaining, not admitted; ranks after the unknown.
        3: reading(five_hour=0, seven_day=95.0, seven_day_resets_in=DAY),
        # 4: no reading (unknown)
        5: limited(),  # a fresh refusal: dropped
        # Equal to 2's score (90): keeps the given order, after 2.
        6: reading(five_hour=10.0, seven_day=0, five_hour_resets_in=FIVE_H),
        # 99 % used: spent, a lower score than 3's.
        7: reading(five_hour=0, seven_day=99.0, seven_day_resets_in=3 * DAY),
    }
    ranking = rank_candidates(
        candidates,
        readings,
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE),
        strategy=BALANCED,
    )
    assert [(r.candidate.subscription_id, r.tier) for r in ranking.ranked] == [
        (1, Tier.MEASURED),
        (2, Tier.MEASURED),
        (6, Tier.MEASURED),
        (4, Tier.UNKNOWN),
        (3, Tier.MEASURED),
        (7, Tier.MEASURED),
    ]
    first = ranking.ranked[0]
    assert first.score == pytest.approx(100.0) and first.limiting_window == "five_hour"
    assert ranking.ranked[3].score is None
    assert [c.subscription_id for c in ranking.dropped] == [5]
    banded = rank_candidates(
        candidates, readings, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    assert [r.candidate.subscription_id for r in banded.ranked] == [2, 6, 1, 3, 7, 4]
    assert all(r.score is None for r in banded.ranked)


def test_balanced_keeps_the_skip_list_rules_of_banded() -> None:
    failed = T0 - 30 * MINUTE
    candidates = [_c(1, failed=failed), _c(2, failed=failed), _c(3, failed=failed), _c(4)]
    readings = {
        1: reading(seven_day=10.0, age=MINUTE),  # serving since the failure
        2: limited(age=50 * MINUTE, resets_in=-MINUTE),  # its window reset after the failure
        4: reading(seven_day=60.0),
    }
    ranking = rank_candidates(
        candidates,
        readings,
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE),
        strategy=BALANCED,
    )
    assert [(r.candidate.subscription_id, r.tier, r.readmitted) for r in ranking.ranked] == [
        (1, Tier.MEASURED, Verdict.SERVING_NOW),
        (4, Tier.MEASURED, None),
        (2, Tier.UNKNOWN, Verdict.WINDOW_RESET),
    ]
    assert [c.subscription_id for c in ranking.last_resort] == [3]


def _plan(
    agents: list[tuple[str, int, str | None]],
    readings: dict[int, Reading],
    failed: frozenset[int] = frozenset(),
) -> list[tuple[str, int, int, Move]]:
    candidates = [_c(pk, failed=T0 - 30 * MINUTE if pk in failed else None) for pk in (1, 2, 3, 4)]
    moves = rebalance_plan(
        agents, candidates, readings, now=T0, max_age=MAX_AGE, provider="anthropic"
    )
    return [(str(m.agent), m.from_id, m.to.candidate.subscription_id, m.move) for m in moves]


def _weekly(used: float) -> Reading:
    # A week to go on both windows' pace: the score is the remaining figure.
    return reading(
        five_hour=0, seven_day=used, five_hour_resets_in=FIVE_H, seven_day_resets_in=WEEK
    )


@pytest.mark.parametrize(
    ("readings", "failed", "moves"),
    [
        # 1 has 50 left, 2 has 60: exactly 20 % better, nobody moves.
        ({1: _weekly(50.0), 2: _weekly(40.0)}, frozenset(), []),
        # 2 has 60.5 left: strictly more than 20 % better: a displacement.
        ({1: _weekly(50.0), 2: _weekly(39.5)}, frozenset(), [("a", 1, 2, Move.DISPLACE)]),
        # 1 at exactly 2 % holds; 2 at exactly 5 % is not admitted anyway.
        ({1: _weekly(98.0), 2: _weekly(95.0)}, frozenset(), []),
        # 1 below 2 % leaves for 2 (just above 5 %), however poor its score.
        ({1: _weekly(98.1), 2: _weekly(94.9)}, frozenset(), [("a", 1, 2, Move.LEAVE)]),
        # 1 refused within the skip window and nothing readmitted it: it leaves.
        ({2: _weekly(90.0)}, frozenset({1}), [("a", 1, 2, Move.LEAVE)]),
        # 1 has no reading at all: the walk decides, on a real refusal.
        ({2: _weekly(0.0)}, frozenset(), []),
    ],
)
def test_the_rebalance_plan_moves_only_where_the_hysteresis_says(
    readings: dict[int, Reading], failed: frozenset[int], moves: list[tuple[str, int, int, Move]]
) -> None:
    assert _plan([("a", 1, None)], readings, failed) == moves


def test_the_rebalance_plan_sends_at_most_one_agent_to_each_plan_per_sweep() -> None:
    readings = {1: _weekly(99.0), 2: _weekly(10.0), 3: _weekly(30.0), 4: _weekly(98.5)}
    agents: list[tuple[str, int, str | None]] = [("a", 1, None), ("b", 1, None), ("c", 1, None)]
    # a takes 2, b the next best (3); c would only find 4, spent, so stays.
    assert _plan(agents, readings) == [("a", 1, 2, Move.LEAVE), ("b", 1, 3, Move.LEAVE)]


def test_the_rebalance_plan_ranks_each_family_on_its_own_window() -> None:
    sonnet_full = reading(
        five_hour=0,
        seven_day=0,
        five_hour_resets_in=FIVE_H,
        seven_day_resets_in=WEEK,
        extra={"seven_day_sonnet": window(99.0, resets_in=WEEK)},
    )
    readings = {1: _weekly(99.0), 2: sonnet_full, 3: _weekly(50.0)}
    agents: list[tuple[str, int, str | None]] = [
        ("opus", 1, "seven_day_opus"),
        ("sonnet", 1, "seven_day_sonnet"),
    ]
    assert _plan(agents, readings) == [
        ("opus", 1, 2, Move.LEAVE),
        ("sonnet", 1, 3, Move.LEAVE),
    ]


def test_the_windows_kept_for_one_family_never_score_another() -> None:
    subject = reading(
        five_hour=10.0,
        seven_day=20.0,
        seven_day_resets_in=WEEK,
        extra={"seven_day_sonnet": window(95.0, resets_in=WEEK)},
    )
    for family in ("seven_day_sonnet", "seven_day_opus", None, "seven_day_sonnet"):
        kept = balance_of(subject, now=T0, max_age=MAX_AGE, family=family)
        afresh = balance_of(replace(subject), now=T0, max_age=MAX_AGE, family=family)
        assert kept == afresh, family
    assert balance_of(subject, now=T0, max_age=MAX_AGE, family="seven_day_sonnet") == Balance(
        5.0, 5.0, "seven_day_sonnet"
    )


def test_plans_that_score_about_as_well_take_agents_fewest_first() -> None:
    # 66 and 58 remaining over a whole week: one band (55.5 to 69.4, a factor of 1.25
    # wide), so equals; the one with fewer agents leads. 40 is a band lower.
    candidates = [_c(3, agents=0), _c(2, agents=2), _c(1, agents=4)]  # load-balance order
    readings = {
        1: reading(five_hour=0, seven_day=34.0, seven_day_resets_in=WEEK),
        2: reading(five_hour=0, seven_day=42.0, seven_day_resets_in=WEEK),
        3: reading(five_hour=0, seven_day=60.0, seven_day_resets_in=WEEK),
    }
    ranking = rank_candidates(
        candidates,
        readings,
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE),
        strategy=BALANCED,
    )

    assert [r.candidate.subscription_id for r in ranking.ranked] == [2, 1, 3]
    assert [round(r.score or 0) for r in ranking.ranked] == [58, 66, 40]


def test_the_ranking_scores_as_balance_of_while_the_kept_classification_holds() -> None:
    # The ranking reads a measured plan's windows from the classification it keeps on
    # the reading (``headroom_held``); asked again as the 5h figure stops counting and
    # as a reset nears, on the same reading, it still scores as ``balance_of`` does.
    subject = reading(
        five_hour=60.0,
        seven_day=20.0,
        five_hour_resets_in=2 * HOUR,
        seven_day_resets_in=3 * DAY,
        extra={"seven_day_sonnet": window(30.0, resets_in=2 * DAY)},
    )
    candidate = _c(1)
    for family in (None, "seven_day_sonnet"):
        for later in (timedelta(0), 29 * MINUTE, 30 * MINUTE, 31 * MINUTE, 50 * MINUTE, -MINUTE):
            now = T0 + later
            admission = Admission(now=now, provider="anthropic", max_age=MAX_AGE, family=family)
            ranked = rank_candidates([candidate], {1: subject}, admission, strategy=BALANCED)
            expected = balance_of(replace(subject), now=now, max_age=MAX_AGE, family=family)
            assert expected is not None
            found = ranked.ranked[0]
            assert (found.score, found.remaining, found.limiting_window) == tuple(expected), (
                family,
                later,
            )
