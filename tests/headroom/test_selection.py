"""Every plan of the provider from the DB, judged by ``admit`` and ranked by cached
headroom, and never a turn blocked on the store."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from agents.models import Agent
from routing.eligibility import Reason
from routing.headroom import alternatives
from routing.headroom.classification import Tier
from routing.headroom.recovery import Verdict
from simulator.control import SimulatorControl
from subscriptions import plan_facts
from subscriptions.headroom.selection import assignment_auto, rank_alternatives
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, Subscription
from subscriptions.plan_facts import candidates_read
from subscriptions.selectors import has_recent_subscription_failures
from tests.agents.factories import AgentFactory
from tests.headroom.factories import plan_on, served
from tests.headroom.readings import T0, limited, reading, window
from tests.headroom.test_store import UNREACHABLE_REDIS
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory
from trinity.models import RoutingStrategy
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db
SECOND = timedelta(seconds=1)
TWO_HOURS = timedelta(hours=2)


@pytest.mark.parametrize(
    ("age", "kind"),
    [
        (TWO_HOURS - SECOND, FailureKind.RATE_LIMIT),
        (TWO_HOURS, FailureKind.RATE_LIMIT),
        (TWO_HOURS + SECOND, FailureKind.RATE_LIMIT),
        (TWO_HOURS - SECOND, FailureKind.AUTH),
        (TWO_HOURS - SECOND, None),
        (TWO_HOURS + SECOND, None),
    ],
)
def test_the_filter_skip_lists_exactly_what_has_recent_subscription_failures_says(
    age: timedelta, kind: str | None
) -> None:
    event = RateLimitEventFactory.create(occurred_at=T0 - age, failure_kind=kind)
    older = RateLimitEventFactory.create(
        subscription=event.subscription, occurred_at=T0 - age - timedelta(minutes=5)
    )

    [candidate] = candidates_read(provider="anthropic", now=T0)

    assert event.subscription_id is not None
    expected = has_recent_subscription_failures(subscription_id=event.subscription_id, now=T0)
    assert (candidate.last_failure_at is not None) is expected
    if expected:
        assert candidate.last_failure_at == event.occurred_at != older.occurred_at


def test_candidates_are_every_plan_of_the_provider_in_load_balance_order(
    django_assert_num_queries: Any,
) -> None:
    own = SubscriptionFactory.create(name="own")
    busy = SubscriptionFactory.create(name="a-busy")
    quiet_b = SubscriptionFactory.create(name="b-quiet")
    quiet_a = SubscriptionFactory.create(name="a-quiet")
    tried = SubscriptionFactory.create(name="tried")
    SubscriptionFactory.create(name="codex", provider="openai-codex")
    agent = AgentFactory.create(subscription=own)
    AgentFactory.create_batch(2, subscription=busy)

    with django_assert_num_queries(1):
        candidates = candidates_read(provider="anthropic", now=T0)

    assert [(c.name, c.agent_count) for c in candidates] == [
        (quiet_a.name, 0),
        (quiet_b.name, 0),
        (tried.name, 0),
        (own.name, 1),
        (busy.name, 2),
    ]
    # The SQL only narrows by provider: the selection judges the rest, and says why.
    chosen = rank_alternatives(agent=agent, exclude_ids=[tried.pk], now=T0)
    assert chosen.order() == [quiet_a.pk, quiet_b.pk, busy.pk]
    excluded = {j.candidate.name: j.verdict.reason for j in chosen.excluded}
    assert excluded == {own.name: Reason.ASSIGNED, tried.name: Reason.TRIED}


def test_the_postgres_query_returns_exactly_the_orm_reference_rows() -> None:
    assert connection.vendor == "postgresql"  # the suite's database: the fast shape runs
    plans = [SubscriptionFactory.create(name=n) for n in ("b", "a", "C", "c", "d-1", "d_2")]
    SubscriptionFactory.create(name="codex", provider="openai-codex")
    for count, plan in zip((2, 0, 1, 1, 0, 3), plans, strict=True):
        AgentFactory.create_batch(count, subscription=plan)
    AgentFactory.create(subscription=None)
    b, a, _, c, excluded, _ = plans
    # a: two refusals in the window; the later one carries a reset and a window.
    RateLimitEventFactory.create(subscription=a, occurred_at=T0 - TWO_HOURS + SECOND)
    RateLimitEventFactory.create(
        subscription=a,
        occurred_at=T0 - timedelta(minutes=5),
        resets_at=T0 + timedelta(hours=1),
        limiting_window="seven_day_sonnet",
    )
    RateLimitEventFactory.create(subscription=b, occurred_at=T0 - TWO_HOURS)  # aged out
    RateLimitEventFactory.create(subscription=c, occurred_at=T0 - SECOND)
    RateLimitEventFactory.create(
        subscription=None, credential_kind="api_key", occurred_at=T0 - SECOND
    )

    fast = candidates_read(provider="anthropic", now=T0)

    queryset = Subscription.objects.filter(provider="anthropic")
    assert fast == plan_facts._candidates_orm(queryset, T0)
    # Without the policy's terms (no rule of a thrifty agent reads them): the same rows,
    # the three terms None, in both shapes.
    lean = candidates_read(provider="anthropic", now=T0, terms=False)
    assert lean == plan_facts._candidates_orm(queryset, T0, terms=False)
    assert lean == [c._replace(plan_type=None, billing_class=None, overage=None) for c in fast]
    assert [(row.name, row.agent_count) for row in fast][0] == ("a", 0)
    assert [row.agent_count for row in fast] == [0, 0, 1, 1, 2, 3]
    assert {row.name for row in fast} == {"a", "b", "C", "c", excluded.name, "d_2"}
    by_name = {row.name: row for row in fast}
    assert by_name["a"].last_failure_at == T0 - timedelta(minutes=5)
    assert by_name["a"].last_failure_window == "seven_day_sonnet"
    assert by_name["a"].last_failure_resets_at == T0 + timedelta(hours=1)
    assert by_name["b"].last_failure_at is None
    assert by_name["c"].last_failure_at == T0 - SECOND
    assert by_name["C"].last_failure_at is None


class TestRankAlternatives:
    def test_it_ranks_by_cached_headroom_and_explains_the_first(self) -> None:
        own = SubscriptionFactory.create(name="own")
        roomy, full_ish, unread = (
            SubscriptionFactory.create(name=n) for n in ("z-roomy", "a-full-ish", "m-unread")
        )
        refusing = SubscriptionFactory.create(name="refusing")
        snapshots_write(
            {
                roomy.pk: reading(five_hour=5.0, seven_day=12.0, age=timedelta(minutes=3)),
                full_ish.pk: reading(five_hour=10.0, seven_day=71.0),
                refusing.pk: limited(),
            }
        )
        agent = AgentFactory.create(subscription=own, model="claude-haiku-4-5")

        chosen = rank_alternatives(agent=agent, now=T0, strategy=RoutingStrategy.BANDED)

        assert chosen.order() == [roomy.pk, full_ish.pk, unread.pk]
        assert [c.subscription_id for c in chosen.dropped] == [refusing.pk]
        assert chosen.reason() == {
            "subscription_id": roomy.pk,
            "tier": "measured",
            "readmitted": None,
            "five_hour": 5.0,
            "seven_day": 12.0,
            "band": 1,
            "score": None,
            "limiting_window": None,
            "reading_age_seconds": 180,
            "candidate_count": 3,
            "last_resort_count": 0,
            "dropped_count": 1,
            "fallback": None,
        }

    def test_skip_listed_ones_come_last_unless_evidence_readmits_them(self) -> None:
        own = SubscriptionFactory.create(name="own")
        recovered = SubscriptionFactory.create(name="recovered")
        silent = SubscriptionFactory.create(name="silent")
        for sub in (recovered, silent):
            RateLimitEventFactory.create(subscription=sub, occurred_at=T0 - timedelta(minutes=30))
        snapshots_write({recovered.pk: limited(age=timedelta(minutes=50), resets_in=-SECOND)})
        agent = AgentFactory.create(subscription=own)

        chosen = rank_alternatives(agent=agent, now=T0)

        assert chosen.order() == [recovered.pk, silent.pk]
        assert chosen.ranked[0].readmitted is Verdict.WINDOW_RESET
        assert chosen.ranked[0].tier is Tier.UNKNOWN
        assert [c.subscription_id for c in chosen.last_resort] == [silent.pk]

    def test_a_sonnet_agent_avoids_a_plan_whose_sonnet_window_is_full(self) -> None:
        own = SubscriptionFactory.create(name="own")
        sonnet_full = SubscriptionFactory.create(name="a-sonnet-full")
        other = SubscriptionFactory.create(name="b-other")
        snapshots_write(
            {
                sonnet_full.pk: reading(
                    seven_day=10.0,
                    extra={"seven_day_sonnet": window(100.0, status="rejected")},
                ),
                other.pk: reading(seven_day=60.0),
            }
        )
        sonnet = AgentFactory.create(subscription=own, model="claude-sonnet-4-5")
        haiku = AgentFactory.create(subscription=own, model="claude-haiku-4-5")

        assert rank_alternatives(agent=sonnet, now=T0).order() == [other.pk]
        assert rank_alternatives(agent=haiku, now=T0).order() == [sonnet_full.pk, other.pk]

    def test_the_balanced_setting_ranks_by_remaining_over_time_left(self) -> None:
        own = SubscriptionFactory.create(name="own")
        roomy = SubscriptionFactory.create(name="a-roomy")
        resetting = SubscriptionFactory.create(name="b-resetting")
        snapshots_write(
            {
                # Banded first (band 1); balanced: 80 left over a whole week → 80.
                roomy.pk: reading(
                    five_hour=0, seven_day=10.0, seven_day_resets_in=timedelta(days=7)
                ),
                # Banded second (band 5); balanced: 50 left with a day to go → 350,
                # limited by its 5h window (100 left over 3 of 5 hours → 166.7).
                resetting.pk: reading(
                    five_hour=0, seven_day=50.0, seven_day_resets_in=timedelta(days=1)
                ),
            }
        )
        agent = AgentFactory.create(subscription=own, model="claude-haiku-4-5")
        system = system_settings_get()
        system.routing_strategy = RoutingStrategy.BANDED
        system.save()
        assert rank_alternatives(agent=agent, now=T0).order() == [roomy.pk, resetting.pk]
        system.routing_strategy = RoutingStrategy.BALANCED
        system.save()

        chosen = rank_alternatives(agent=agent, now=T0)

        assert chosen.order() == [resetting.pk, roomy.pk]
        reason = chosen.reason()
        assert (reason["score"], reason["limiting_window"]) == (166.7, "five_hour")
        banded = rank_alternatives(agent=agent, now=T0, strategy=RoutingStrategy.BANDED)
        assert banded.order() == [roomy.pk, resetting.pk]

    def test_with_the_store_down_it_returns_db_order_and_warns(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        own = SubscriptionFactory.create(name="own")
        busy = SubscriptionFactory.create(name="a-busy")
        quiet = SubscriptionFactory.create(name="b-quiet")
        skipped = SubscriptionFactory.create(name="c-skipped")
        RateLimitEventFactory.create(subscription=skipped, occurred_at=T0 - timedelta(minutes=5))
        AgentFactory.create(subscription=busy)
        snapshots_write({busy.pk: reading(seven_day=1.0)})
        agent = AgentFactory.create(subscription=own)

        with override_settings(CACHES=UNREACHABLE_REDIS), caplog.at_level(logging.WARNING):
            chosen = rank_alternatives(agent=agent, now=T0)

        assert chosen.fallback == "store_unreachable"
        assert chosen.order() == [quiet.pk, busy.pk, skipped.pk]
        assert "judging 4 plans unread" in caplog.text
        assert chosen.reason()["fallback"] == "store_unreachable"

    def test_a_ranking_failure_returns_db_order_and_warns(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        own = SubscriptionFactory.create(name="own")
        b, a = SubscriptionFactory.create(name="b"), SubscriptionFactory.create(name="a")
        snapshots_write({b.pk: reading(seven_day=1.0), a.pk: reading(seven_day=90.0)})

        real = alternatives.rank_candidates

        def broken(candidates: Any, readings: Any, *args: Any, **kwargs: Any) -> Any:
            if readings:  # a bug on the readings' path: judged without them, it ranks
                raise ZeroDivisionError("ranking bug")
            return real(candidates, readings, *args, **kwargs)

        monkeypatch.setattr(alternatives, "rank_candidates", broken)
        agent = AgentFactory.create(subscription=own)

        with caplog.at_level(logging.WARNING):
            chosen = rank_alternatives(agent=agent, now=T0)

        assert chosen.fallback == "ranking_failed"
        assert chosen.order() == [a.pk, b.pk]
        assert "ranking failed" in caplog.text

    def test_ranking_never_probes(self, sim: SimulatorControl) -> None:
        own = plan_on(sim)
        plan_on(sim)
        plan_on(sim)
        agent = AgentFactory.create(subscription=own)

        assert len(rank_alternatives(agent=agent, now=T0).order()) == 2
        assert served(sim) == []


class TestAssignmentAuto:
    def test_a_new_agent_gets_the_best_ranked_subscription(self) -> None:
        fuller = SubscriptionFactory.create(name="a-fuller")
        roomier = SubscriptionFactory.create(name="b-roomier")
        snapshots_write({fuller.pk: reading(seven_day=55.0), roomier.pk: reading(seven_day=5.0)})
        agent = AgentFactory.create(subscription=None)

        result = assignment_auto(agent=agent, now=T0)

        assert (result.assigned, result.subscription_id) == (True, roomier.pk)
        assert Agent.objects.get(pk=agent.pk).subscription_id == roomier.pk
        assert result.selection is not None
        assert result.selection.reason()["tier"] == "measured"

    def test_a_plan_in_the_skip_list_is_better_than_none(self) -> None:
        only = SubscriptionFactory.create()
        RateLimitEventFactory.create(subscription=only, occurred_at=T0 - timedelta(minutes=1))
        agent = AgentFactory.create(subscription=None)

        assert assignment_auto(agent=agent, now=T0).subscription_id == only.pk

    def test_without_subscriptions_nothing_changes(self) -> None:
        agent = AgentFactory.create(subscription=None)
        result = assignment_auto(agent=agent, now=T0)
        assert (result.assigned, result.subscription_id) == (False, None)

    def test_an_agent_assigned_meanwhile_is_left_alone(self) -> None:
        theirs, ours = SubscriptionFactory.create(name="theirs"), SubscriptionFactory.create()
        snapshots_write({ours.pk: reading(seven_day=1.0)})
        agent = AgentFactory.create(subscription=None)
        Agent.objects.filter(pk=agent.pk).update(subscription=theirs)  # another process won

        result = assignment_auto(agent=agent, now=T0)

        assert (result.assigned, result.subscription_id) == (False, theirs.pk)
        assert Agent.objects.get(pk=agent.pk).subscription_id == theirs.pk

    def test_a_fresh_refusal_is_never_auto_assigned(self) -> None:
        refusing = SubscriptionFactory.create(name="a-refusing")
        snapshots_write({refusing.pk: limited()})
        agent = AgentFactory.create(subscription=None)
        result = assignment_auto(agent=agent, now=T0)
        assert (result.assigned, result.subscription_id) == (False, None)
        assert result.selection is not None
        assert [c.subscription_id for c in result.selection.dropped] == [refusing.pk]


def test_the_postgres_query_keeps_the_orm_order_and_every_microsecond() -> None:
    # The provider's WHERE reaches the query as the queryset's own; the instants come
    # back to the microsecond (the query carries them as integer microseconds).
    plans = [SubscriptionFactory.create(name=n) for n in ("b", "a", "C", "c")]
    for count, plan in zip((1, 0, 2, 0), plans, strict=True):
        AgentFactory.create_batch(count, subscription=plan)
    RateLimitEventFactory.create(
        subscription=plans[2],
        occurred_at=T0 - SECOND + timedelta(microseconds=7),
        resets_at=T0 + timedelta(hours=1, microseconds=3),
        limiting_window="five_hour",
        failure_kind=FailureKind.RATE_LIMIT,
    )
    SubscriptionFactory.create(name="codex", provider="openai-codex")
    everyone = Subscription.objects.filter(provider="anthropic")

    fast = plan_facts._candidates_postgres(everyone, T0)

    assert fast == plan_facts._candidates_orm(everyone, T0)
    assert [c.name for c in fast] == ["a", "c", "b", "C"]
    refused = fast[-1]
    assert refused.last_failure_at == T0 - SECOND + timedelta(microseconds=7)
    assert refused.last_failure_resets_at == T0 + timedelta(hours=1, microseconds=3)
    assert refused.last_failure_window == "five_hour"
    assert refused.last_failure_kind == FailureKind.RATE_LIMIT
    assert (refused.paused, refused.plan_type, refused.overage) == (False, "max-20x", "refuse")


def test_a_paused_plan_is_in_no_order_a_turn_reads_however_good_its_reading() -> None:
    # Placement takes its targets from the ranked plans, a walk and pre-dispatch too:
    # a paused plan is excluded with its reason, never ranked, never a last resort.
    own = SubscriptionFactory.create(name="own")
    best = SubscriptionFactory.create(name="a-best", paused_at=T0 - timedelta(minutes=1))
    other = SubscriptionFactory.create(name="b-other")
    snapshots_write({best.pk: reading(seven_day=1.0), other.pk: reading(seven_day=60.0)})
    agent = AgentFactory.create(subscription=own)

    chosen = rank_alternatives(agent=agent, now=T0)

    assert chosen.order() == [other.pk]
    assert {j.candidate.name: j.verdict.reason for j in chosen.excluded} == {
        "own": Reason.ASSIGNED,
        "a-best": Reason.PAUSED,
    }
