"""Table tests for the pure headroom rules, boundaries included."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from subscriptions.headroom.reading import Reading, ReadingStatus, WindowReading
from subscriptions.headroom.rules import (
    AlertLevel,
    Candidate,
    Gate,
    Tier,
    Verdict,
    alert_crossings,
    classify_headroom,
    earliest_known_reset,
    family_window,
    probe_due,
    rank_candidates,
    reading_gate,
    reading_replaces,
    recovery_verdict,
    resolve_rate_limited_now,
)
from tests.headroom.readings import T0, limited, reading, window

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
MAX_AGE = HOUR


def test_the_rules_import_neither_django_nor_redis() -> None:
    import ast
    from pathlib import Path

    import subscriptions.headroom.reading as reading_module
    import subscriptions.headroom.rules as rules_module

    for module in (rules_module, reading_module):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported = {
            name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
        }
        assert not imported & {"django", "redis", "django_redis", "rest_framework"}, module


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


@pytest.mark.parametrize(
    ("model", "window_name"),
    [
        ("claude-sonnet-4-5", "seven_day_sonnet"),
        ("claude-opus-4-1", "seven_day_opus"),
        ("claude-haiku-4-5", None),
        ("", None),
    ],
)
def test_a_model_names_its_family_window(model: str, window_name: str | None) -> None:
    assert family_window(model) == window_name


# rate_limited_now: three-state, never OR'd


@pytest.mark.parametrize(
    ("case", "subject", "last_refusal_at", "events", "expected", "asks_events"),
    [
        ("fresh limited beats quiet events", limited(), None, False, True, False),
        ("fresh healthy beats a 2h event", reading(), None, True, False, False),
        ("no reading: the events decide (yes)", None, None, True, True, True),
        ("no reading: the events decide (no)", None, None, False, False, True),
        (
            "a stale limited reading decides nothing",
            limited(age=2 * HOUR),
            None,
            False,
            False,
            True,
        ),
        (
            "a limited reading whose reset is now: the quota is back, whatever the events",
            limited(resets_in=timedelta(0)),
            None,
            True,
            False,
            False,
        ),
        (
            "a limited reading whose reset passed, refused again after it: the events decide",
            limited(resets_in=-10 * MINUTE),
            T0 - 5 * MINUTE,
            True,
            True,
            True,
        ),
        (
            "a healthy reading older than the last refusal is superseded",
            reading(age=10 * MINUTE),
            T0 - 5 * MINUTE,
            True,
            True,
            True,
        ),
        (
            "a healthy reading newer than the last refusal decides",
            reading(age=5 * MINUTE),
            T0 - 10 * MINUTE,
            True,
            False,
            False,
        ),
        (
            "an invalid token is not about rate limits",
            Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
            None,
            True,
            True,
            True,
        ),
    ],
)
def test_resolve_rate_limited_now(
    case: str,
    subject: Reading | None,
    last_refusal_at: datetime | None,
    events: bool,
    expected: bool,
    asks_events: bool,
) -> None:
    asked: list[bool] = []

    def events_say_limited() -> bool:
        asked.append(True)
        return events

    result = resolve_rate_limited_now(
        subject,
        now=T0,
        max_age=MAX_AGE,
        events_say_limited=events_say_limited,
        last_refusal_at=last_refusal_at,
    )
    assert result is expected, case
    assert bool(asked) is asks_events, case


@pytest.mark.parametrize(
    ("case", "refusal_window", "family", "expected", "asks_events"),
    [
        (
            "a fresh reading without the Sonnet week cannot clear a Sonnet-week refusal",
            "seven_day_sonnet",
            "seven_day_sonnet",
            True,
            True,
        ),
        ("a core-window refusal is cleared by a fresh reading", "five_hour", None, False, False),
        ("a refusal of unknown window is cleared by a fresh reading", None, None, False, False),
    ],
)
def test_a_fresh_reading_clears_only_the_windows_it_describes(
    case: str, refusal_window: str | None, family: str | None, expected: bool, asks_events: bool
) -> None:
    asked: list[bool] = []

    def events_say_limited() -> bool:
        asked.append(True)
        return True

    result = resolve_rate_limited_now(
        reading(age=MINUTE),  # five_hour and seven_day only, as an Opus answer's headers
        now=T0,
        max_age=MAX_AGE,
        events_say_limited=events_say_limited,
        last_refusal_at=T0 - 5 * MINUTE,
        family=family,
        refusal_window=refusal_window,
    )
    assert result is expected, case
    assert bool(asked) is asks_events, case


# Readmission: absence of evidence readmits nothing


RESET = T0 - MINUTE  # a refusal window that reset a minute ago


def _reset_reading() -> Reading:
    """A refusal read 50 minutes ago whose 5h window reset a minute ago."""
    return limited(age=50 * MINUTE, resets_in=-MINUTE)


@pytest.mark.parametrize(
    ("case", "subject", "last_failure_at", "verdict"),
    [
        (
            "a fresh serving reading after the failure",
            reading(age=MINUTE),
            T0 - 5 * MINUTE,
            Verdict.SERVING_NOW,
        ),
        (
            "a fresh serving reading before the failure",
            reading(age=10 * MINUTE),
            T0 - 5 * MINUTE,
            None,
        ),
        (
            "a serving reading taken at the failure instant",
            reading(age=5 * MINUTE),
            T0 - 5 * MINUTE,
            None,
        ),
        ("a fresh refusal", limited(), T0 - 5 * MINUTE, None),
        ("no reading at all", None, T0 - 5 * MINUTE, None),
        ("a stale serving reading", reading(age=2 * HOUR), T0 - 5 * MINUTE, None),
        ("failure just before the reset", _reset_reading(), RESET - SECOND, Verdict.WINDOW_RESET),
        ("failure exactly at the reset", _reset_reading(), RESET, None),
        ("failure just after the reset", _reset_reading(), RESET + SECOND, None),
        (
            "reset instant equal to now has elapsed",
            limited(age=50 * MINUTE, resets_in=timedelta(0)),
            T0 - 10 * MINUTE,
            Verdict.WINDOW_RESET,
        ),
        (
            "a stale refusal whose reset is still ahead",
            limited(age=2 * HOUR, resets_in=HOUR),
            T0 - 5 * MINUTE,
            None,
        ),
        (
            "a refused token has no window to wait out",
            Reading(fetched_at=T0 - 2 * HOUR, status=ReadingStatus.INVALID_TOKEN),
            T0 - 5 * MINUTE,
            None,
        ),
    ],
)
def test_recovery_verdict(
    case: str, subject: Reading | None, last_failure_at: datetime, verdict: Verdict | None
) -> None:
    assert (
        recovery_verdict(subject, now=T0, max_age=MAX_AGE, last_failure_at=last_failure_at)
        is verdict
    ), case


def test_a_reset_only_counts_once_every_blocked_window_has_reset() -> None:
    both_full = reading(
        five_hour=100,
        five_hour_status="rejected",
        five_hour_resets_in=-MINUTE,
        seven_day=100,
        seven_day_status="rejected",
        seven_day_resets_in=HOUR,
        status=ReadingStatus.RATE_LIMITED,
        age=2 * HOUR,
    )
    verdict = recovery_verdict(both_full, now=T0, max_age=MAX_AGE, last_failure_at=T0 - 90 * MINUTE)
    assert verdict is None


# The earliest known reset


@pytest.mark.parametrize(
    ("case", "subjects", "expected"),
    [
        ("the soonest of two", [limited(resets_in=2 * HOUR), limited(resets_in=HOUR)], T0 + HOUR),
        (
            "a reset equal to now is not reported",
            [limited(resets_in=timedelta(0)), limited(resets_in=2 * HOUR)],
            T0 + 2 * HOUR,
        ),
        ("only past resets: none", [limited(resets_in=-MINUTE), limited(resets_in=-HOUR)], None),
        ("healthy readings name no reset", [reading(), None], None),
        ("nothing known", [], None),
    ],
)
def test_earliest_known_reset_is_never_in_the_past(
    case: str, subjects: list[Reading | None], expected: datetime | None
) -> None:
    assert earliest_known_reset(subjects, now=T0) == expected, case


def test_a_credential_blocked_on_two_windows_serves_after_the_later_reset() -> None:
    both = reading(
        five_hour=100,
        five_hour_status="rejected",
        five_hour_resets_in=HOUR,
        seven_day=100,
        seven_day_status="rejected",
        seven_day_resets_in=2 * 24 * HOUR,
        status=ReadingStatus.RATE_LIMITED,
    )
    assert earliest_known_reset([both], now=T0) == T0 + 2 * 24 * HOUR


# The sampler's cadence


INTERVAL = timedelta(seconds=300)
LIMITED_INTERVAL = timedelta(seconds=60)


@pytest.mark.parametrize(
    ("case", "subject", "last_failure_at", "due"),
    [
        ("never probed", None, None, True),
        ("healthy, just inside the slack", reading(age=timedelta(seconds=269)), None, False),
        (
            "healthy, at the interval less 30 s slack",
            reading(age=timedelta(seconds=270)),
            None,
            True,
        ),
        ("limited, before its shorter interval", limited(age=timedelta(seconds=53)), None, False),
        ("limited, at its interval less 10%", limited(age=timedelta(seconds=54)), None, True),
        (
            "healthy but refused since: limited cadence",
            reading(age=timedelta(seconds=60)),
            T0 - timedelta(seconds=30),
            True,
        ),
        (
            "healthy and refused before it: normal cadence",
            reading(age=timedelta(seconds=60)),
            T0 - timedelta(seconds=90),
            False,
        ),
        (
            "a window reset makes it due at once",
            limited(age=SECOND, resets_in=timedelta(0)),
            None,
            True,
        ),
    ],
)
def test_probe_due(
    case: str, subject: Reading | None, last_failure_at: datetime | None, due: bool
) -> None:
    result = probe_due(
        subject,
        now=T0,
        interval=INTERVAL,
        limited_interval=LIMITED_INTERVAL,
        last_failure_at=last_failure_at,
    )
    assert result is due, case


# Alerts


@pytest.mark.parametrize(
    ("threshold", "utilization", "level"),
    [
        (0, 99.0, None),  # off
        (75, 74.9, None),
        (75, 75.0, AlertLevel.WARNING),
        (75, 89.9, AlertLevel.WARNING),
        (75, 90.0, AlertLevel.CRITICAL),
        (95, 94.9, None),
        (95, 95.0, AlertLevel.CRITICAL),  # escalation at max(threshold, 90)
    ],
)
def test_alert_levels_at_their_edges(
    threshold: int, utilization: float, level: AlertLevel | None
) -> None:
    crossings = alert_crossings(reading(five_hour=0, seven_day=utilization), threshold=threshold)
    assert [c.level for c in crossings if c.window == "seven_day"] == ([level] if level else [])


def test_a_failed_probe_alerts_nothing() -> None:
    failed = Reading(
        fetched_at=T0,
        status=ReadingStatus.ERROR,
        windows={"seven_day": WindowReading(99.0, None, "allowed")},
    )
    assert alert_crossings(failed, threshold=75) == []


# Ranking


def _c(pk: int, agents: int = 0, failed: datetime | None = None) -> Candidate:
    return Candidate(pk, f"plan-{pk}", agents, failed)


def test_measured_candidates_rank_by_band_then_agent_count_then_given_order() -> None:
    candidates = [_c(1, 0), _c(2, 1), _c(3, 1), _c(4, 2), _c(5, 0)]
    readings = {
        1: reading(five_hour=0, seven_day=25.0),  # band 2
        2: reading(five_hour=0, seven_day=12.0),  # band 1, 1 agent
        3: reading(five_hour=0, seven_day=19.9),  # band 1, 1 agent: after 2 (given order)
        4: reading(five_hour=0, seven_day=10.0),  # band 1, 2 agents
        5: reading(five_hour=0, seven_day=20.0),  # band 2 (the edge), 0 agents
    }
    ranking = rank_candidates(candidates, readings, now=T0, max_age=MAX_AGE)
    assert [r.candidate.subscription_id for r in ranking.ranked] == [2, 3, 4, 1, 5]
    assert all(r.tier is Tier.MEASURED for r in ranking.ranked)


def test_a_stale_five_hour_figure_no_longer_pushes_a_candidate_down() -> None:
    candidates = [_c(1), _c(2)]
    readings = {
        1: reading(five_hour=95.0, seven_day=30.0, age=31 * MINUTE),  # ranks on 30
        2: reading(five_hour=0, seven_day=50.0),
    }
    ranking = rank_candidates(candidates, readings, now=T0, max_age=MAX_AGE)
    assert [r.candidate.subscription_id for r in ranking.ranked] == [1, 2]
    fresh = {**readings, 1: reading(five_hour=95.0, seven_day=30.0, age=30 * MINUTE)}
    ranking = rank_candidates(candidates, fresh, now=T0, max_age=MAX_AGE)
    assert [r.candidate.subscription_id for r in ranking.ranked] == [2, 1]


def test_unknown_follow_measured_in_load_balance_order_and_fresh_refusals_drop() -> None:
    candidates = [_c(1), _c(2), _c(3), _c(4), _c(5)]
    readings = {
        2: reading(seven_day=80.0),
        3: limited(),
        4: reading(age=2 * HOUR),  # stale: unknown
        5: Reading(fetched_at=T0, status=ReadingStatus.INVALID_TOKEN),
    }
    ranking = rank_candidates(candidates, readings, now=T0, max_age=MAX_AGE)
    assert [(r.candidate.subscription_id, r.tier) for r in ranking.ranked] == [
        (2, Tier.MEASURED),
        (1, Tier.UNKNOWN),
        (4, Tier.UNKNOWN),
    ]
    assert [c.subscription_id for c in ranking.dropped] == [3, 5]
    assert ranking.last_resort == ()


def test_skip_listed_candidates_rank_only_when_readmitted() -> None:
    failed = T0 - 30 * MINUTE
    candidates = [_c(1, failed=failed), _c(2, failed=failed), _c(3, failed=failed), _c(4)]
    readings = {
        1: reading(seven_day=10.0, age=MINUTE),  # serving since the failure
        2: limited(age=50 * MINUTE, resets_in=-MINUTE),  # its window reset after the failure
        # 3: no reading: absence of evidence readmits nothing
        4: reading(seven_day=60.0),
    }
    ranking = rank_candidates(candidates, readings, now=T0, max_age=MAX_AGE)
    assert [(r.candidate.subscription_id, r.tier, r.readmitted) for r in ranking.ranked] == [
        (1, Tier.MEASURED, Verdict.SERVING_NOW),
        (4, Tier.MEASURED, None),
        (2, Tier.UNKNOWN, Verdict.WINDOW_RESET),
    ]
    assert [c.subscription_id for c in ranking.last_resort] == [3]


@pytest.mark.parametrize(
    ("prior", "new", "replaces"),
    [
        (None, Reading(fetched_at=T0, status=ReadingStatus.ERROR), True),  # nothing to keep
        (reading(), Reading(fetched_at=T0, status=ReadingStatus.ERROR), False),
        (limited(), Reading(fetched_at=T0, status=ReadingStatus.ERROR), False),  # keeps its reset
        (Reading(fetched_at=T0, status=ReadingStatus.ERROR), reading(), True),
        (reading(), limited(), True),
    ],
)
def test_an_error_reading_never_replaces_an_answer(
    prior: Reading | None, new: Reading, replaces: bool
) -> None:
    assert reading_replaces(prior, new) is replaces


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
        [Candidate(1, "a", 0)], {1: subject}, now=T0, max_age=MAX_AGE, family=family
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
    rank_candidates([Candidate(1, "a", 0)], {1: ranked}, now=T0, max_age=MAX_AGE)
    assert ranked._fast is not None and fresh._fast is None
    assert ranked == fresh
    assert repr(ranked) == repr(fresh)
    assert "_fast" not in repr(ranked)
