"""Table tests for the gate and the classification of a reading, boundaries
included; judged on its precomputed figures to the microsecond."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from routing.eligibility import Admission, Candidate
from routing.headroom.classification import Gate, Tier, classify_headroom, reading_gate
from routing.headroom.ranking import rank_candidates
from routing.headroom.reading import Reading, ReadingStatus
from routing.headroom.recovery import recovery_verdict
from tests.headroom.readings import T0, limited, reading, window

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
MAX_AGE = HOUR


# The usability gate


@pytest.mark.parametrize(
    ("case", "subject", "family", "gate"),
    [
        ("no reading", None, None, Gate.ABSENT),
        ("exactly max_age old is still fresh", reading(age=MAX_AGE), None, Gate.USABLE),
        ("a second older is stale", reading(age=MAX_AGE + SECOND), None, Gate.STALE),
        ("the probe got no answer", reading(status=ReadingStatus.ERROR), None, Gate.NO_ANSWER),
        (
            "a 5h reset equal to now: that window is gone",
            reading(five_hour_resets_in=timedelta(0)),
            None,
            Gate.WINDOW_RESET,
        ),
        (
            "a 5h reset a second from now",
            reading(five_hour_resets_in=SECOND),
            None,
            Gate.USABLE,
        ),
        ("a refusal whose reset is now", limited(resets_in=timedelta(0)), None, Gate.WINDOW_RESET),
        ("a refusal lifting later", limited(resets_in=SECOND), None, Gate.USABLE),
        (
            "the turn's family window reset",
            reading(extra={"seven_day_sonnet": window(5.0, resets_in=-SECOND)}),
            "seven_day_sonnet",
            Gate.WINDOW_RESET,
        ),
        (
            "another family's window does not matter",
            reading(extra={"seven_day_opus": window(5.0, resets_in=-SECOND)}),
            "seven_day_sonnet",
            Gate.USABLE,
        ),
        ("serving but no weekly figure", reading(seven_day=None), None, Gate.MALFORMED),
        (
            "a window without a status",
            reading(extra={"seven_day_sonnet": window(5.0, status=None)}),
            "seven_day_sonnet",
            Gate.MALFORMED,
        ),
        (
            "a refusal needs no figures",
            Reading(fetched_at=T0, status=ReadingStatus.RATE_LIMITED),
            None,
            Gate.USABLE,
        ),
        (
            "an invalid token needs no figures",
            Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
            None,
            Gate.USABLE,
        ),
    ],
)
def test_the_gate_admits_only_fresh_answered_well_shaped_readings(
    case: str, subject: Reading | None, family: str | None, gate: Gate
) -> None:
    assert reading_gate(subject, now=T0, max_age=MAX_AGE, family=family) is gate, case


# Classification


@pytest.mark.parametrize(
    ("case", "subject", "family", "tier", "fullness"),
    [
        (
            "healthy: the fuller window ranks",
            reading(five_hour=40, seven_day=20),
            None,
            Tier.MEASURED,
            40,
        ),
        (
            "5h figure exactly 30 minutes old still counts",
            reading(five_hour=40, seven_day=20, age=30 * MINUTE),
            None,
            Tier.MEASURED,
            40,
        ),
        (
            "5h figure a second older no longer counts",
            reading(five_hour=40, seven_day=20, age=30 * MINUTE + SECOND),
            None,
            Tier.MEASURED,
            20,
        ),
        (
            "a warning is still serving",
            reading(seven_day=85, seven_day_status="allowed_warning"),
            None,
            Tier.MEASURED,
            85,
        ),
        (
            "a rejected window refuses",
            reading(seven_day_status="rejected"),
            None,
            Tier.REFUSING,
            None,
        ),
        (
            "an unknown window status blocks (allowlist)",
            reading(five_hour_status="throttled"),
            None,
            Tier.REFUSING,
            None,
        ),
        ("a 429 refuses", limited(), None, Tier.REFUSING, None),
        (
            "an invalid token refuses",
            Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
            None,
            Tier.REFUSING,
            None,
        ),
        ("stale is unknown", reading(age=2 * HOUR), None, Tier.UNKNOWN, None),
        ("absent is unknown", None, None, Tier.UNKNOWN, None),
        (
            "the turn's family window counts toward fullness",
            reading(five_hour=10, seven_day=20, extra={"seven_day_sonnet": window(70.0)}),
            "seven_day_sonnet",
            Tier.MEASURED,
            70,
        ),
        (
            "the turn's family window can refuse",
            reading(extra={"seven_day_sonnet": window(100.0, status="rejected")}),
            "seven_day_sonnet",
            Tier.REFUSING,
            None,
        ),
        (
            "another family's full window does not refuse",
            reading(extra={"seven_day_opus": window(100.0, status="rejected")}),
            "seven_day_sonnet",
            Tier.MEASURED,
            20,
        ),
    ],
)
def test_classify_headroom(
    case: str, subject: Reading | None, family: str | None, tier: Tier, fullness: float | None
) -> None:
    headroom = classify_headroom(subject, now=T0, max_age=MAX_AGE, family=family)
    assert (headroom.tier, headroom.fullness) == (tier, fullness), case


@pytest.mark.parametrize(
    ("fullness", "band"),
    [(0.0, 0), (9.9, 0), (10.0, 1), (19.9, 1), (20.0, 2), (99.9, 9), (100.0, 10), (130.0, 10)],
)
def test_bands_are_ten_points_wide_with_the_edge_in_the_upper_band(
    fullness: float, band: int
) -> None:
    headroom = classify_headroom(reading(five_hour=0, seven_day=fullness), now=T0, max_age=MAX_AGE)
    assert headroom.band == band


# The ranking's precomputed form (instants as integer microseconds, kept on the reading)

MICROSECOND = timedelta(microseconds=1)
PLUS_TWO = timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    ("case", "subject", "family", "gate"),
    [
        (
            "a malformed 5h window decides before a weekly window that reset",
            reading(five_hour_status=None, seven_day_resets_in=-SECOND),  # type: ignore[arg-type]
            None,
            Gate.MALFORMED,
        ),
        (
            "a 5h window that reset decides before a malformed weekly one",
            reading(five_hour_resets_in=-SECOND, seven_day_status=None),  # type: ignore[arg-type]
            None,
            Gate.WINDOW_RESET,
        ),
        (
            "a malformed core window decides before the family window's reset",
            reading(
                seven_day_status=None,  # type: ignore[arg-type]
                extra={"seven_day_sonnet": window(5.0, resets_in=-SECOND)},
            ),
            "seven_day_sonnet",
            Gate.MALFORMED,
        ),
        (
            "a reset one microsecond from now has not happened",
            reading(five_hour_resets_in=MICROSECOND),
            None,
            Gate.USABLE,
        ),
        (
            "a reading one microsecond past max_age is stale",
            reading(age=MAX_AGE + MICROSECOND),
            None,
            Gate.STALE,
        ),
    ],
)
def test_the_ranking_judges_windows_in_order_to_the_microsecond(
    case: str, subject: Reading, family: str | None, gate: Gate
) -> None:
    assert reading_gate(subject, now=T0, max_age=MAX_AGE, family=family) is gate, case
    ranking = rank_candidates(
        [Candidate(1, "a", 0)],
        {1: subject},
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE, family=family),
    )
    assert ranking.ranked[0].headroom.gate is gate, case


def test_instants_compare_as_instants_whatever_their_time_zone() -> None:
    # A reset equal to now, written in another offset, is a reset at now.
    subject = reading(five_hour_resets_in=timedelta(0))
    now = T0.astimezone(PLUS_TWO)
    assert reading_gate(subject, now=now, max_age=MAX_AGE) is Gate.WINDOW_RESET
    assert reading_gate(subject, now=now - MICROSECOND, max_age=MAX_AGE) is Gate.USABLE


def test_the_precomputed_form_is_no_part_of_a_readings_identity() -> None:
    ranked, fresh = reading(), reading()
    rank_candidates(
        [Candidate(1, "a", 0)],
        {1: ranked},
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE),
    )
    assert ranked._precomputed is not None and fresh._precomputed is None
    assert ranked == fresh
    assert repr(ranked) == repr(fresh)
    assert "_precomputed" not in repr(ranked)


# The classification kept on a reading (``headroom_held``) while it holds

WEEK = timedelta(days=7)


def _edges(subject: Reading, max_age: timedelta) -> list[datetime]:
    # Every instant at which a comparison the classification makes with now flips, a
    # microsecond either side of it, and the instants between.
    found = [subject.fetched_at + max_age, subject.fetched_at + timedelta(minutes=30)]
    found += [w.resets_at for w in subject.windows.values() if w.resets_at is not None]
    if subject.reset_at is not None:
        found.append(subject.reset_at)
    instants = [e + d * MICROSECOND for e in found for d in (-1, 0, 1)]
    instants += [subject.fetched_at, subject.fetched_at + 2 * WEEK]
    ordered = sorted(instants)
    return ordered + [(a + (b - a) / 2) for a, b in zip(ordered, ordered[1:], strict=False)]


@pytest.mark.parametrize(
    "subject",
    [
        reading(five_hour=95.0, seven_day=30.0, five_hour_resets_in=2 * HOUR, age=MINUTE),
        limited(resets_in=10 * MINUTE),
        # A refusal whose own reset comes before its windows'.
        reading(
            status=ReadingStatus.RATE_LIMITED,
            reset_in=10 * MINUTE,
            five_hour_status="rejected",
            five_hour_resets_in=HOUR,
        ),
        # The family window resets before the core ones.
        reading(
            five_hour_resets_in=4 * MINUTE,
            seven_day_resets_in=HOUR,
            extra={"seven_day_sonnet": window(70.0, resets_in=3 * MINUTE, status="rejected")},
        ),
        reading(seven_day_status=None),  # type: ignore[arg-type]
        Reading(fetched_at=T0, status=ReadingStatus.ERROR),
    ],
)
@pytest.mark.parametrize("family", [None, "seven_day_sonnet", "seven_day_opus"])
def test_a_kept_classification_is_the_one_made_afresh_at_every_instant_in_any_order(
    subject: Reading, family: str | None
) -> None:
    instants = _edges(subject, MAX_AGE)
    shuffled = random.Random(1).sample(instants, len(instants))
    for max_age in (MAX_AGE, 2 * MAX_AGE, MAX_AGE):
        for now in (*instants, *reversed(instants), *shuffled):
            kept = classify_headroom(subject, now=now, max_age=max_age, family=family)
            afresh = classify_headroom(replace(subject), now=now, max_age=max_age, family=family)
            assert kept == afresh, (now, max_age)
    # Between the two limits' edges, a kept classification under one limit is not the
    # other's.
    between = subject.fetched_at + 1.5 * MAX_AGE
    for max_age in (2 * MAX_AGE, MAX_AGE, 2 * MAX_AGE):
        kept = classify_headroom(subject, now=between, max_age=max_age, family=family)
        afresh = classify_headroom(replace(subject), now=between, max_age=max_age, family=family)
        assert kept == afresh, max_age


# A reading goes stale per window: a weekly block outlives a 5-hour rollover.


def _weekly_block(*, five_hour_resets_in: timedelta, seven_day_resets_in: timedelta) -> Reading:
    """The 7d window rejected until ``seven_day_resets_in``; the 5h one allowed at 28%."""
    return reading(
        five_hour=28.0,
        five_hour_resets_in=five_hour_resets_in,
        seven_day=100.0,
        seven_day_status="rejected",
        seven_day_resets_in=seven_day_resets_in,
        status=ReadingStatus.RATE_LIMITED,
        reset_in=seven_day_resets_in,
    )


@pytest.mark.parametrize(
    ("case", "five_hour_resets_in", "seven_day_resets_in", "tier", "gate"),
    [
        ("before the 5h rollover", MINUTE, timedelta(days=3), Tier.REFUSING, Gate.USABLE),
        ("at the 5h rollover", timedelta(0), timedelta(days=3), Tier.REFUSING, Gate.USABLE),
        ("after the 5h rollover", -MINUTE, timedelta(days=3), Tier.REFUSING, Gate.USABLE),
        ("a second before the weekly reset", -HOUR, SECOND, Tier.REFUSING, Gate.USABLE),
        ("at the weekly reset", -HOUR, timedelta(0), Tier.UNKNOWN, Gate.WINDOW_RESET),
    ],
)
def test_a_weekly_block_keeps_refusing_past_a_5h_rollover_until_its_own_reset(
    case: str,
    five_hour_resets_in: timedelta,
    seven_day_resets_in: timedelta,
    tier: Tier,
    gate: Gate,
) -> None:
    subject = _weekly_block(
        five_hour_resets_in=five_hour_resets_in, seven_day_resets_in=seven_day_resets_in
    )
    headroom = classify_headroom(subject, now=T0, max_age=MAX_AGE)
    assert (headroom.tier, headroom.gate) == (tier, gate), case


def test_a_weekly_block_past_a_5h_rollover_is_not_readmitted_by_the_rollover() -> None:
    subject = _weekly_block(five_hour_resets_in=-MINUTE, seven_day_resets_in=timedelta(days=3))
    assert (
        recovery_verdict(subject, now=T0, max_age=MAX_AGE, last_failure_at=T0 - timedelta(hours=1))
        is None
    )
    # Classified once before the rollover and again after it: the memo does not hold
    # the old answer across the 5h reset.
    before = classify_headroom(subject, now=T0 - 2 * MINUTE, max_age=MAX_AGE)
    after = classify_headroom(subject, now=T0, max_age=MAX_AGE)
    assert before.tier is after.tier is Tier.REFUSING
    at_weekly_reset = classify_headroom(
        subject, now=T0 + timedelta(days=3), max_age=timedelta(days=4)
    )
    assert at_weekly_reset.gate is Gate.WINDOW_RESET
