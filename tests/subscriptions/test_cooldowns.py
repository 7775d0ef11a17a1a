"""Cooldowns follow the upstream: a refusal that names its reset keeps the subscription
out until that instant (never longer than the 2h skip window) and it is readmitted
right after; a 429 with no quota evidence is a throttle, kept out for a short backoff
(1 minute, doubling per consecutive throttle, at most 15) instead of the 2h window."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import time_machine

from routing.attempt_refusal import QuotaEvidence, classify_attempt_refusal
from routing.eligibility import Admission, Candidate
from routing.headroom.ranking import rank_candidates
from routing.headroom.recovery import Verdict
from routing.headroom.throttle import THROTTLE, THROTTLE_STREAK_GAP, throttle_backoff
from subscriptions.headroom.store import snapshots_write, turn_evidence_read
from subscriptions.models import FailureKind, RateLimitEvent
from subscriptions.plan_facts import candidates_read
from subscriptions.services import record_rate_limit_event
from tests.headroom.readings import T0, limited, reading
from tests.routing.verdicts import assigned_refusing
from tests.subscriptions.factories import SubscriptionFactory

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
MAX_AGE = HOUR


# What is a throttle


@pytest.mark.parametrize(
    ("error_code", "detail", "resets_at", "window", "throttle"),
    [
        ("rate_limit", "API Error: 429 rate_limit_error: Number of requests", None, "", True),
        ("rate_limit", "429 Too Many Requests", None, "", True),
        # the real CLI's sentence once it stops retrying a throttle
        (
            "rate_limit",
            "API Error: Server is temporarily limiting requests (not your usage limit) · "
            "Number of request tokens has exceeded your per-minute rate limit",
            None,
            "",
            True,
        ),
        # any quota evidence makes it a quota refusal
        ("rate_limit", "API Error: 429 rate_limit_error", T0 + HOUR, "", False),
        ("rate_limit", "API Error: 429 rate_limit_error", None, "five_hour", False),
        ("rate_limit", "You've hit your limit", None, "", False),
        ("rate_limit", "You've hit your weekly limit · resets soon", None, "", False),
        ("rate_limit", "usage limit reached", None, "", False),
        # only a rate limit can be a throttle
        ("auth", "Failed to authenticate. API Error: 401", None, "", False),
        ("upstream_error", "API Error: 529 Overloaded", None, "", False),
    ],
)
def test_a_429_without_quota_evidence_is_a_throttle(
    error_code: str, detail: str, resets_at: datetime | None, window: str, throttle: bool
) -> None:
    evidence = QuotaEvidence(resets_at, window)
    refusal = classify_attempt_refusal(error_code=error_code, detail=detail, evidence=evidence)
    assert refusal.throttle is throttle
    if throttle:
        # It walks, is recorded as a rate limit, and ends a turn as a quota refusal.
        assert (refusal.failure_kind, refusal.reason, refusal.walks, refusal.quota) == (
            "rate_limit",
            "throttled",
            True,
            True,
        )
    # Without the evidence nothing can tell: a rate limit stays one.
    assert not classify_attempt_refusal(error_code=error_code, detail=detail).throttle


# The backoff


def _throttles(*ago: timedelta) -> list[tuple[str, datetime]]:
    return [(THROTTLE, T0 - a) for a in ago]


@pytest.mark.parametrize(
    ("earlier", "backoff"),
    [
        ([], MINUTE),
        (_throttles(MINUTE), 2 * MINUTE),
        (_throttles(MINUTE, 3 * MINUTE), 4 * MINUTE),
        (_throttles(MINUTE, 3 * MINUTE, 7 * MINUTE), 8 * MINUTE),
        (_throttles(MINUTE, 3 * MINUTE, 7 * MINUTE, 15 * MINUTE), 15 * MINUTE),  # not 16
        (_throttles(*(n * MINUTE for n in range(1, 30))), 15 * MINUTE),  # capped
        # the streak continues while each throttle follows the previous within 30 min
        (_throttles(THROTTLE_STREAK_GAP), 2 * MINUTE),
        (_throttles(THROTTLE_STREAK_GAP + SECOND), MINUTE),
        (_throttles(MINUTE, MINUTE + THROTTLE_STREAK_GAP), 4 * MINUTE),
        (_throttles(MINUTE, MINUTE + THROTTLE_STREAK_GAP + SECOND), 2 * MINUTE),
        # a quota refusal in between ends the streak
        (
            [(THROTTLE, T0 - MINUTE), ("five_hour", T0 - 2 * MINUTE), (THROTTLE, T0 - 3 * MINUTE)],
            2 * MINUTE,
        ),
        ([("", T0 - MINUTE), (THROTTLE, T0 - 2 * MINUTE)], MINUTE),
    ],
)
def test_a_throttle_backs_off_one_minute_doubling_to_fifteen(
    earlier: list[tuple[str, datetime]], backoff: timedelta
) -> None:
    assert throttle_backoff(earlier, now=T0) == backoff


@pytest.mark.django_db
def test_consecutive_throttles_record_backoffs_of_1_2_4_8_15_minutes_as_their_resets() -> None:
    subscription = SubscriptionFactory.create()
    seen = []
    at = T0
    for _ in range(6):
        with time_machine.travel(at, tick=False):
            event = record_rate_limit_event(
                agent_name="bot",
                subscription_id=subscription.pk,
                error_message="API Error: 429 rate_limit_error",
                failure_kind=FailureKind.RATE_LIMIT,
                throttle=True,
                now=at,
            )
        assert event.limiting_window == THROTTLE
        assert event.resets_at is not None
        seen.append(event.resets_at - at)
        at = event.resets_at  # throttled again as soon as it is readmitted
    assert seen == [MINUTE * n for n in (1, 2, 4, 8, 15, 15)]


@pytest.mark.django_db
def test_a_throttle_on_a_plan_whose_reading_shows_a_block_is_a_quota_refusal() -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        snapshots_write({subscription.pk: limited()})
        event = record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="API Error: 429",
            failure_kind=FailureKind.RATE_LIMIT,
            throttle=True,
            now=T0,
        )
    assert (event.limiting_window, event.resets_at) == ("five_hour", None)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("after", "refusing"),
    [(timedelta(0), True), (59 * SECOND, True), (MINUTE, False), (MINUTE + SECOND, False)],
)
def test_pre_dispatch_keeps_a_throttled_plan_out_until_its_backoff_ends(
    after: timedelta, refusing: bool
) -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        # A reading from before the throttle says it serves: the throttle is newer.
        snapshots_write({subscription.pk: reading(age=10 * MINUTE)})
        record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="API Error: 429 rate_limit_error",
            failure_kind=FailureKind.RATE_LIMIT,
            throttle=True,
            now=T0,
        )
    with time_machine.travel(T0 + after, tick=False):
        evidence = turn_evidence_read(subscription.pk)
        assert assigned_refusing(evidence, now=T0 + after) is refusing


# Readmission at the reset the refusal carried


def _refused(resets_at: datetime | None, *, ago: timedelta = 10 * MINUTE) -> Candidate:
    return Candidate(1, "plan-1", 0, T0 - ago, resets_at, "five_hour")


@pytest.mark.parametrize(
    ("resets_at", "readmitted"),
    [
        (T0 + SECOND, False),  # one second before its reset: still out
        (T0, True),  # a reset equal to now readmits
        (T0 - SECOND, True),
        (T0 - 9 * MINUTE, True),  # reset after the refusal (10 minutes ago)
        # A reset at the refusal's instant, or within a minute before it, names the
        # instance the refusal was made in (resets jitter; the CLI prints them to the
        # minute): that reset readmits. More than a minute before, it was refused
        # again after the reset: that reset brought nothing back.
        (T0 - 10 * MINUTE, True),
        (T0 - 11 * MINUTE, True),
        (T0 - 11 * MINUTE - SECOND, False),
        (None, False),  # no reset named: absence of evidence readmits nothing
    ],
)
def test_a_refusal_keeps_the_plan_out_until_the_reset_it_named(
    resets_at: datetime | None, readmitted: bool
) -> None:
    ranking = rank_candidates(
        [_refused(resets_at)], {}, Admission(now=T0, provider="anthropic", max_age=MAX_AGE)
    )
    if readmitted:
        assert [(r.candidate.subscription_id, r.readmitted) for r in ranking.ranked] == [
            (1, Verdict.WINDOW_RESET)
        ]
    else:
        assert [c.subscription_id for c in ranking.last_resort] == [1]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("after", "skip_listed"),
    [(2 * HOUR - SECOND, True), (2 * HOUR, False), (2 * HOUR + SECOND, False)],
)
def test_a_far_reset_never_keeps_a_plan_out_longer_than_the_2h_window(
    after: timedelta, skip_listed: bool
) -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(T0, tick=False):
        record_rate_limit_event(
            agent_name="bot",
            subscription_id=subscription.pk,
            error_message="You've hit your limit",
            failure_kind=FailureKind.RATE_LIMIT,
            resets_at=T0 + timedelta(days=3),
            limiting_window="seven_day",
            now=T0,
        )
    now = T0 + after
    with time_machine.travel(now, tick=False):
        [candidate] = candidates_read(provider=subscription.provider, now=now)
        ranking = rank_candidates(
            [candidate], {}, Admission(now=now, provider="anthropic", max_age=MAX_AGE)
        )
        evidence = turn_evidence_read(subscription.pk)
        assert assigned_refusing(evidence, now=now) is skip_listed
    assert (candidate.last_failure_at is not None) is skip_listed
    assert [c.subscription_id for c in ranking.last_resort] == ([subscription.pk] * skip_listed)
    assert RateLimitEvent.objects.count() == 1
