"""Per-model-family blocks: a refusal limited by a family window (the Sonnet weekly)
keeps out only that family's turns on that subscription; a core-window refusal keeps
out every turn. Tables for the pure rules (which window a refusal names, whom it
blocks, the walk's skip-list and readmission), then the pre-dispatch read and the
recording against the real cache and database."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import time_machine

from routing.eligibility import Admission, Candidate
from routing.headroom.classification import Tier
from routing.headroom.ranking import rank_candidates
from routing.headroom.reading import Reading
from routing.headroom.recovery import Verdict
from routing.headroom.refusal_windows import refusal_blocks, refusal_window
from routing.headroom.throttle import THROTTLE
from routing.headroom.windows import family_window
from subscriptions.headroom.store import (
    RefusalMark,
    TurnEvidence,
    refusal_marker_write,
    snapshots_write,
    turn_evidence_read,
)
from subscriptions.models import FailureKind, RateLimitEvent
from subscriptions.services import record_rate_limit_event
from tests.headroom.readings import T0, reading, window
from tests.routing.verdicts import assigned_refusing
from tests.subscriptions.factories import SubscriptionFactory

MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
MAX_AGE = HOUR
SONNET = "seven_day_sonnet"
OPUS = "seven_day_opus"


@pytest.mark.parametrize(
    ("limiting_window", "family", "blocks"),
    [
        (SONNET, SONNET, True),  # the family's own weekly
        (SONNET, OPUS, False),  # another family runs
        (OPUS, SONNET, False),
        (SONNET, None, True),  # the turn's family is unknown: the block may be about it
        ("five_hour", OPUS, True),  # a core window blocks every family
        ("seven_day", OPUS, True),
        ("five_hour", None, True),
        (THROTTLE, OPUS, True),  # a throttle is the whole credential's
        ("", OPUS, True),  # an unknown window blocks everything, as before
        (None, OPUS, True),
    ],
)
def test_a_family_window_refusal_blocks_only_its_family(
    limiting_window: str | None, family: str | None, blocks: bool
) -> None:
    assert refusal_blocks(limiting_window, family) is blocks


def test_a_turns_family_comes_from_its_model() -> None:
    assert family_window("claude-sonnet-5-5") == SONNET
    assert family_window("claude-opus-4-5") == OPUS
    assert family_window("claude-haiku-4-5") is None


def _with_family(
    *,
    sonnet_resets_in: timedelta,
    sonnet_status: str = "allowed",
    seven_day_resets_in: timedelta = timedelta(days=3),
    seven_day_status: str = "allowed",
) -> Reading:
    return reading(
        seven_day_resets_in=seven_day_resets_in,
        seven_day_status=seven_day_status,
        extra={SONNET: window(40.0, resets_in=sonnet_resets_in, status=sonnet_status)},
    )


SONNET_RESET = T0 + timedelta(days=5)


@pytest.mark.parametrize(
    ("family", "resets_at", "window_name"),
    [
        # An Opus turn spends no Sonnet quota: that block does not explain its refusal.
        (OPUS, None, ""),
        (OPUS, SONNET_RESET, ""),
        (SONNET, None, SONNET),
        (SONNET, SONNET_RESET, SONNET),
        (None, None, SONNET),  # unknown family: every window may explain it
    ],
)
def test_only_the_windows_the_refused_turn_spends_explain_its_refusal(
    family: str | None, resets_at: datetime | None, window_name: str
) -> None:
    cached = _with_family(sonnet_resets_in=5 * 24 * HOUR, sonnet_status="rejected")
    assert refusal_window(cached, resets_at=resets_at, now=T0, family=family) == window_name


@pytest.mark.parametrize(
    ("case", "cached", "resets_at", "claim", "window_name"),
    [
        (
            "the claim wins",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            None,
            "five_hour",
            "five_hour",
        ),
        (
            "reset matches the family window exactly",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            SONNET_RESET,
            "",
            SONNET,
        ),
        # The CLI prints minutes: a reset 59 s or exactly 60 s off is the same window.
        (
            "reset 60 s early",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            SONNET_RESET - MINUTE,
            "",
            SONNET,
        ),
        (
            "reset 60 s late",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            SONNET_RESET + MINUTE,
            "",
            SONNET,
        ),
        # 61 s off matches nothing; nothing is blocked either: unknown.
        (
            "reset 61 s off",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            SONNET_RESET + MINUTE + SECOND,
            "",
            "",
        ),
        (
            "the 5h window's reset",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            T0 + 3 * HOUR,
            "",
            "five_hour",
        ),
        # A weekly and a family window that started together: the core one (safe side).
        (
            "weekly and family share a reset",
            _with_family(sonnet_resets_in=3 * 24 * HOUR, seven_day_resets_in=3 * 24 * HOUR),
            T0 + 3 * 24 * HOUR,
            "",
            "seven_day",
        ),
        # ...unless only the family one is blocked: the blocked one refused.
        (
            "shared reset, only the family blocked",
            _with_family(
                sonnet_resets_in=3 * 24 * HOUR,
                seven_day_resets_in=3 * 24 * HOUR,
                sonnet_status="rejected",
            ),
            T0 + 3 * 24 * HOUR,
            "",
            SONNET,
        ),
        # No reset to match: the reading's blocked window.
        (
            "no reset, the family blocked",
            _with_family(sonnet_resets_in=5 * 24 * HOUR, sonnet_status="rejected"),
            None,
            "",
            SONNET,
        ),
        (
            "no reset, weekly and family blocked",
            _with_family(
                sonnet_resets_in=5 * 24 * HOUR,
                sonnet_status="rejected",
                seven_day_status="rejected",
            ),
            None,
            "",
            "seven_day",
        ),
        # A blocked window whose reset has passed (reset == now) blocks nothing any more.
        (
            "no reset, the blocked window reset at now",
            _with_family(sonnet_resets_in=timedelta(0), sonnet_status="rejected"),
            None,
            "",
            "",
        ),
        ("no reading", None, SONNET_RESET, "", ""),
        (
            "nothing blocked, nothing matches",
            _with_family(sonnet_resets_in=5 * 24 * HOUR),
            None,
            "",
            "",
        ),
    ],
)
def test_the_limiting_window_is_inferred_from_the_cached_reading(
    case: str,
    cached: Reading | None,
    resets_at: datetime | None,
    claim: str,
    window_name: str,
) -> None:
    assert refusal_window(cached, resets_at=resets_at, now=T0, claim=claim) == window_name, case


def _failed(pk: int, window_name: str, *, resets_at: datetime | None = None) -> Candidate:
    return Candidate(pk, f"plan-{pk}", 0, T0 - 10 * MINUTE, resets_at, window_name)


@pytest.mark.parametrize(
    ("window_name", "family", "skip_listed"),
    [
        (SONNET, OPUS, False),
        (SONNET, SONNET, True),
        (SONNET, None, True),
        ("five_hour", OPUS, True),
        ("seven_day", OPUS, True),
        (THROTTLE, OPUS, True),
        ("", OPUS, True),
    ],
)
def test_the_walks_skip_list_holds_a_subscription_only_for_the_blocked_family(
    window_name: str, family: str | None, skip_listed: bool
) -> None:
    # The reading predates the refusal: only the refusal says anything now.
    readings = {1: reading(age=30 * MINUTE)}
    ranking = rank_candidates(
        [_failed(1, window_name)],
        readings,
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE, family=family),
    )
    assert [c.subscription_id for c in ranking.last_resort] == ([1] if skip_listed else [])
    if not skip_listed:
        assert [(r.candidate.subscription_id, r.tier, r.readmitted) for r in ranking.ranked] == [
            (1, Tier.MEASURED, None)
        ]


def test_a_fresh_reading_with_the_family_blocked_drops_only_that_familys_turn() -> None:
    blocked = {1: _with_family(sonnet_resets_in=5 * 24 * HOUR, sonnet_status="rejected")}
    candidates = [_failed(1, SONNET)]
    sonnet = rank_candidates(
        candidates, blocked, Admission(now=T0, provider="anthropic", max_age=MAX_AGE, family=SONNET)
    )
    opus = rank_candidates(
        candidates, blocked, Admission(now=T0, provider="anthropic", max_age=MAX_AGE, family=OPUS)
    )
    assert [c.subscription_id for c in sonnet.dropped] == [1]
    assert [r.candidate.subscription_id for r in opus.ranked] == [1]


@pytest.mark.parametrize(
    ("reset_in", "readmitted"),
    [(MINUTE, False), (SECOND, False), (timedelta(0), True), (-SECOND, True)],
)
def test_a_family_blocked_subscription_is_readmitted_for_its_family_from_its_reset(
    reset_in: timedelta, readmitted: bool
) -> None:
    ranking = rank_candidates(
        [_failed(1, SONNET, resets_at=T0 + reset_in)],
        {},
        Admission(now=T0, provider="anthropic", max_age=MAX_AGE, family=SONNET),
    )
    if readmitted:
        assert [(r.candidate.subscription_id, r.readmitted) for r in ranking.ranked] == [
            (1, Verdict.WINDOW_RESET)
        ]
    else:
        assert [c.subscription_id for c in ranking.last_resort] == [1]


# Pre-dispatch: the assigned plan's mark, read from the cache


def _evidence(window_name: str, *, cached: Reading | None = None) -> TurnEvidence:
    mark = RefusalMark(
        at=T0 - 5 * MINUTE,
        failure_kind=FailureKind.RATE_LIMIT,
        resets_at=T0 + timedelta(days=5),
        limiting_window=window_name,
    )
    return TurnEvidence(reachable=True, reading=cached, refusal=mark)


@pytest.mark.parametrize(
    ("window_name", "family", "refusing"),
    [
        (SONNET, OPUS, False),  # an Opus turn stays on the plan
        (SONNET, SONNET, True),  # a Sonnet turn goes elsewhere before its first attempt
        (SONNET, None, True),
        ("seven_day", OPUS, True),
        ("", OPUS, True),
    ],
)
def test_pre_dispatch_routes_around_a_family_block_only_for_that_family(
    window_name: str, family: str | None, refusing: bool
) -> None:
    with time_machine.travel(T0, tick=False):
        assert assigned_refusing(_evidence(window_name), now=T0, family=family) is refusing


def test_pre_dispatch_reads_a_fresh_family_block_in_the_reading_for_that_family_only() -> None:
    blocked = _with_family(sonnet_resets_in=5 * 24 * HOUR, sonnet_status="rejected")
    evidence = TurnEvidence(reachable=True, reading=blocked)
    with time_machine.travel(T0, tick=False):
        assert assigned_refusing(evidence, now=T0, family=SONNET) is True
        assert assigned_refusing(evidence, now=T0, family=OPUS) is False


# Recording: the event and the mark carry the window


@pytest.mark.django_db
def test_a_cli_refusal_records_the_family_window_its_reset_names_and_marks_it() -> None:
    subscription = SubscriptionFactory.create()
    # The window resets 37 s past the minute the CLI printed.
    cached = reading(
        extra={SONNET: window(100.0, resets_in=timedelta(days=5, seconds=37), status="allowed")}
    )
    with time_machine.travel(T0, tick=False):
        snapshots_write({subscription.pk: cached})
        event = record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="You've hit your limit · resets Jan 6, 12:00pm (UTC)",
            failure_kind=FailureKind.RATE_LIMIT,
            resets_at=T0 + timedelta(days=5),
            now=T0,
        )
        mark = turn_evidence_read(subscription.pk).refusal
    event.refresh_from_db()
    assert (event.limiting_window, event.resets_at) == (SONNET, T0 + timedelta(days=5))
    assert mark is not None and mark.limiting_window == SONNET


@pytest.mark.django_db
def test_the_providers_claim_is_recorded_as_it_came() -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        event = record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="API Error: 429 rate_limit_error",
            failure_kind=FailureKind.RATE_LIMIT,
            resets_at=T0 + HOUR,
            limiting_window=OPUS,
            now=T0,
        )
    assert RateLimitEvent.objects.get(pk=event.pk).limiting_window == OPUS


@pytest.mark.django_db
def test_without_a_reading_the_window_stays_unknown_and_blocks_every_family() -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="You've hit your limit · resets 4:10am (UTC)",
            failure_kind=FailureKind.RATE_LIMIT,
            resets_at=T0 + HOUR,
            now=T0,
        )
        evidence = turn_evidence_read(subscription.pk)
        assert evidence.refusal is not None and evidence.refusal.limiting_window == ""
        assert assigned_refusing(evidence, now=T0, family=OPUS) is True


@pytest.mark.django_db
def test_the_walks_candidates_carry_the_latest_refusals_window() -> None:
    from subscriptions.plan_facts import candidates_read

    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="429",
            failure_kind=FailureKind.RATE_LIMIT,
            resets_at=T0 + HOUR,
            limiting_window=SONNET,
            now=T0 - MINUTE,
        )
        [candidate] = candidates_read(provider=subscription.provider, now=T0)
    assert candidate.last_failure_window == SONNET


def test_a_mark_written_by_an_older_process_reads_as_an_unknown_window() -> None:
    subscription_id = 987654
    with time_machine.travel(T0, tick=False):
        refusal_marker_write(
            subscription_id,
            RefusalMark(at=T0, failure_kind=FailureKind.RATE_LIMIT),
            ttl=60,
        )
        from django.core.cache import cache

        from subscriptions.headroom.store import refusal_key

        stored = cache.get(refusal_key(subscription_id))
        stored.pop("limiting_window")
        cache.set(refusal_key(subscription_id), stored, timeout=60)
        mark = turn_evidence_read(subscription_id).refusal
    assert mark is not None and mark.limiting_window == ""
