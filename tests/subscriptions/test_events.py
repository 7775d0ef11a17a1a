from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from subscriptions.models import FailureKind, RateLimitEvent
from subscriptions.selectors import has_recent_subscription_failures, is_subscription_rate_limited
from subscriptions.services import rate_limit_events_cleanup, record_rate_limit_event
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
TWO_HOURS = timedelta(hours=2)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("age", "kind", "rate_limited", "recent_failure"),
    [
        (TWO_HOURS - SECOND, FailureKind.RATE_LIMIT, True, True),  # just inside
        (TWO_HOURS, FailureKind.RATE_LIMIT, False, False),  # the edge has aged out
        (TWO_HOURS + SECOND, FailureKind.RATE_LIMIT, False, False),  # just outside
        (timedelta(0), FailureKind.RATE_LIMIT, True, True),
        (TWO_HOURS - SECOND, FailureKind.AUTH, False, True),  # auth skips, not "rate limited"
        (TWO_HOURS - SECOND, None, False, True),  # legacy NULL rows skip too
        (TWO_HOURS + SECOND, None, False, False),
    ],
)
def test_predicates_answer_at_the_two_hour_boundary(
    age: timedelta, kind: str | None, rate_limited: bool, recent_failure: bool
) -> None:
    event = RateLimitEventFactory.create(occurred_at=NOW - age, failure_kind=kind)
    sub_id = event.subscription_id
    assert sub_id is not None
    assert is_subscription_rate_limited(subscription_id=sub_id, now=NOW) is rate_limited
    assert has_recent_subscription_failures(subscription_id=sub_id, now=NOW) is recent_failure


def test_predicates_look_only_at_their_own_subscription() -> None:
    RateLimitEventFactory.create(occurred_at=NOW)
    quiet = SubscriptionFactory.create()
    assert not is_subscription_rate_limited(subscription_id=quiet.pk, now=NOW)
    assert not has_recent_subscription_failures(subscription_id=quiet.pk, now=NOW)


def test_predicates_follow_the_moved_clock() -> None:
    subscription = SubscriptionFactory.create()
    with time_machine.travel(NOW, tick=False):
        record_rate_limit_event(
            agent_name="a",
            subscription_id=subscription.pk,
            error_message="429",
            failure_kind=FailureKind.RATE_LIMIT,
            now=NOW,
        )
    with time_machine.travel(NOW + TWO_HOURS - SECOND, tick=False):
        from trinity import clock

        assert is_subscription_rate_limited(subscription_id=subscription.pk, now=clock.now())
    with time_machine.travel(NOW + TWO_HOURS + SECOND, tick=False):
        assert not is_subscription_rate_limited(subscription_id=subscription.pk, now=clock.now())


def test_record_redacts_the_message_and_keeps_an_aware_instant() -> None:
    subscription = SubscriptionFactory.create()
    leaked = "sk-ant-oat01-" + "Q" * 40
    event = record_rate_limit_event(
        agent_name="a",
        subscription_id=subscription.pk,
        error_message=f"401 for token {leaked}",
        failure_kind=FailureKind.AUTH,
        now=NOW,
    )
    event.refresh_from_db()
    assert leaked not in event.error_message
    assert "[redacted]" in event.error_message
    assert event.occurred_at == NOW
    assert event.occurred_at.tzinfo is not None


def test_record_refuses_a_naive_instant_and_an_unknown_kind() -> None:
    subscription = SubscriptionFactory.create()
    with pytest.raises(ValueError, match="aware"):
        record_rate_limit_event(
            agent_name="a",
            subscription_id=subscription.pk,
            error_message="x",
            failure_kind=None,
            now=NOW.replace(tzinfo=None),
        )
    with pytest.raises(ValueError, match="failure_kind"):
        record_rate_limit_event(
            agent_name="a",
            subscription_id=subscription.pk,
            error_message="x",
            failure_kind="model_unsupported",
            now=NOW,
        )
    assert RateLimitEvent.objects.count() == 0


def test_cleanup_deletes_only_rows_older_than_24h() -> None:
    subscription = SubscriptionFactory.create()
    day = timedelta(hours=24)
    old = RateLimitEventFactory.create(subscription=subscription, occurred_at=NOW - day - SECOND)
    edge = RateLimitEventFactory.create(subscription=subscription, occurred_at=NOW - day)
    young = RateLimitEventFactory.create(subscription=subscription, occurred_at=NOW - day + SECOND)
    assert rate_limit_events_cleanup(now=NOW) == 1
    remaining = set(RateLimitEvent.objects.values_list("pk", flat=True))
    assert remaining == {edge.pk, young.pk}
    assert old.pk not in remaining


def test_a_platform_key_refusal_is_recorded_with_its_kind_and_reset() -> None:
    resets = NOW + timedelta(minutes=40)
    event = record_rate_limit_event(
        agent_name="a",
        credential_kind="api_key",
        subscription_id=None,
        error_message="Credit balance is too low",
        failure_kind=FailureKind.AUTH,
        resets_at=resets,
        now=NOW,
    )
    event.refresh_from_db()
    assert (event.credential_kind, event.subscription_id, event.resets_at) == (
        "api_key",
        None,
        resets,
    )


def test_a_subscription_refusal_must_name_its_subscription() -> None:
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        RateLimitEvent.objects.create(
            agent_name="a", credential_kind="subscription", subscription=None, occurred_at=NOW
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        RateLimitEvent.objects.create(
            agent_name="a",
            credential_kind="api_key",
            subscription=SubscriptionFactory.create(),
            occurred_at=NOW,
        )
