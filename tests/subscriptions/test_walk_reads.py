"""The reads around the walk: one three-state rule for display, pre-dispatch (the
assignment's verdict, ``admit``) and ranking, and the key rung's gates. Real database
and cache."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import AnonymousUser

from agents.models import Agent
from routing.headroom.reading import Reading
from subscriptions.headroom.selection import rank_alternatives
from subscriptions.headroom.selectors import headroom_usage_get
from subscriptions.headroom.store import snapshots_write, turn_evidence_read
from subscriptions.key_rung_state import key_rung_available, key_rung_state
from subscriptions.models import FailureKind
from subscriptions.rung_secrets import subscription_rungs
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from tests.headroom.readings import T0, limited, reading
from tests.routing.verdicts import assigned_refusing
from tests.subscriptions.factories import SubscriptionFactory, refuse
from trinity import services as trinity_services
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db
MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("case", "snapshot", "refused_ago", "refusal_resets_in", "serves"),
    [
        ("no evidence at all", None, None, None, True),
        ("a fresh serving reading", reading(), None, None, True),
        ("a fresh refusing reading", limited(), None, None, False),
        ("a refusal in the window, no reading", None, 30 * MINUTE, None, False),
        (
            "a fresh serving reading beats an older refusal",
            reading(age=MINUTE),
            10 * MINUTE,
            None,
            True,
        ),
        (
            "a refusal newer than the serving reading wins",
            reading(age=20 * MINUTE),
            10 * MINUTE,
            None,
            False,
        ),
        # The case the two rules used to disagree on: the limited reading's window
        # has reset since, and nothing refused after that reset.
        (
            "a limited reading whose reset has passed",
            limited(age=50 * MINUTE, resets_in=-MINUTE),
            55 * MINUTE,
            None,
            True,
        ),
        (
            "a reset that passed before the refusal",
            limited(age=50 * MINUTE, resets_in=-20 * MINUTE),
            10 * MINUTE,
            None,
            False,
        ),
        ("the refusal's own reset has passed", None, 30 * MINUTE, -MINUTE, True),
        ("the refusal's own reset is still ahead", None, 30 * MINUTE, 20 * MINUTE, False),
        ("a refusal just outside the 2h window", None, 2 * 60 * MINUTE, None, True),
    ],
)
def test_display_pre_dispatch_and_ranking_agree_on_one_reading(
    case: str,
    snapshot: Reading | None,
    refused_ago: timedelta | None,
    refusal_resets_in: timedelta | None,
    serves: bool,
) -> None:
    subject = SubscriptionFactory.create(name="subject")
    agent = AgentFactory.create()  # another agent, unassigned: subject is its alternative
    if snapshot is not None:
        snapshots_write({subject.pk: snapshot})
    if refused_ago is not None:
        refuse(subject, ago=refused_ago, resets_in=refusal_resets_in)
    display = headroom_usage_get(
        subscription=subject, now=T0, user=AnonymousUser()
    ).rate_limited_now
    pre_dispatch = assigned_refusing(turn_evidence_read(subject.pk), now=T0)
    selection = rank_alternatives(agent=agent, now=T0)
    ranked = subject.pk in [r.candidate.subscription_id for r in selection.ranked]
    assert (not display, not pre_dispatch, ranked) == (serves, serves, serves), case


def test_pre_dispatch_knows_nothing_when_the_cache_is_down() -> None:
    from subscriptions.headroom.store import TurnEvidence

    assert not assigned_refusing(TurnEvidence(reachable=False), now=T0)


def test_an_auth_refusal_alone_does_not_route_before_dispatch() -> None:
    subject = SubscriptionFactory.create()
    refuse(subject, ago=5 * MINUTE, kind=FailureKind.AUTH)
    assert not assigned_refusing(turn_evidence_read(subject.pk), now=T0)


class TestKeyRung:
    @pytest.fixture
    def agent(self) -> Agent:
        trinity_services.platform_api_key_set(key="sk-ant-api03-" + "k" * 40)
        return AgentFactory.create()

    def _key_refused(self, *, ago: timedelta, kind: str) -> None:
        record_rate_limit_event(
            agent_name="x",
            credential_kind="api_key",
            subscription_id=None,
            error_message="refused",
            failure_kind=kind,
            now=T0 - ago,
        )

    def available(self, agent: Agent, now: datetime = T0) -> bool:
        return key_rung_available(agent=agent, system=system_settings_get(), now=now)

    def test_it_is_open_with_a_key_and_the_fallback_on(self, agent: Agent) -> None:
        assert self.available(agent)

    def test_the_fallback_setting_closes_it(self, agent: Agent) -> None:
        trinity_services.system_setting_set(name="subscription_api_key_fallback", value=False)
        assert not self.available(agent)

    def test_no_key_closes_it(self, agent: Agent) -> None:
        trinity_services.platform_api_key_clear()
        assert not self.available(agent)

    def test_an_agent_that_must_never_bill_the_key(self, agent: Agent) -> None:
        agent.use_platform_api_key = False
        assert not self.available(agent)
        agent.use_platform_api_key = None  # unset follows the system setting
        assert self.available(agent)

    @pytest.mark.parametrize(
        ("kind", "ago", "open_"),
        [
            (FailureKind.RATE_LIMIT, 5 * MINUTE - timedelta(seconds=1), False),
            (FailureKind.RATE_LIMIT, 5 * MINUTE, True),  # a burst is not "no credit"
            (FailureKind.AUTH, 119 * MINUTE, False),
            (FailureKind.AUTH, 120 * MINUTE, True),  # the 2h edge has aged out
        ],
    )
    def test_a_recent_refusal_closes_it_for_its_kind(
        self, agent: Agent, kind: str, ago: timedelta, open_: bool
    ) -> None:
        self._key_refused(ago=ago, kind=kind)
        assert self.available(agent) is open_

    @pytest.mark.parametrize(
        ("refused_with", "open_"),
        [
            ("kkkk", False),  # the configured key (…kkkk) refused: closed
            ("zzzz", True),  # another key refused: the configured one starts clean
            ("", False),  # a row of unknown key (before fingerprints): counts against it
        ],
    )
    def test_only_a_refusal_of_the_configured_key_closes_it(
        self, agent: Agent, refused_with: str, open_: bool
    ) -> None:
        record_rate_limit_event(
            agent_name="x",
            credential_kind="api_key",
            subscription_id=None,
            error_message="Credit balance is too low",
            failure_kind=FailureKind.AUTH,
            credential_fingerprint=refused_with,
            now=T0 - MINUTE,
        )
        state = key_rung_state(agent=agent, system=system_settings_get(), now=T0)
        assert state.available is open_
        if not open_:
            assert state.fingerprint == "kkkk"


def test_the_walk_loads_every_candidate_token_in_one_query(
    django_assert_num_queries: object,
) -> None:
    subs = SubscriptionFactory.create_batch(5)
    with django_assert_num_queries(1):  # type: ignore[operator]
        rungs = subscription_rungs(s.pk for s in subs)
    assert {r.subscription_id for r in rungs.values()} == {s.pk for s in subs}
    assert all(r.secret.reveal().startswith("sk-ant-oat01-") for r in rungs.values())


@pytest.mark.django_db
def test_a_placement_look_is_claimed_once_per_interval_per_agent() -> None:
    from django.test import override_settings

    from subscriptions.placement_look import placement_due

    assert placement_due(7) is True
    assert placement_due(7) is False  # another turn of the same agent, moments later
    assert placement_due(8) is True  # another agent is its own
    unreachable = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    }
    with override_settings(CACHES=unreachable):
        assert placement_due(9) is False  # an optimisation: an outage skips it
