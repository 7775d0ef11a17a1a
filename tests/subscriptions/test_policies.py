"""The routing policy's verdicts as tables: the catalog's classes, which plans and
which key a policy allows, whether it may leave its plan, the assignment gate, the
candidates filter, and the affinity rule."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agents import lifecycle
from agents.models import Agent, RoutingPolicy
from routing import billing, policy
from routing.billing import PlanEntry
from routing.eligibility import Excluded, Reason
from routing.rung import RungKind
from routing.walk import Stop
from subscriptions.headroom.selection import rank_alternatives
from subscriptions.headroom.store import snapshots_write
from subscriptions.key_rung_state import key_rung_available
from subscriptions.models import FailureKind, Subscription
from subscriptions.plan_facts import candidates_read
from subscriptions.policy_refusals import assignment_policy_refusal, switching_stop
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from tests.headroom.readings import limited, reading
from tests.routing.verdicts import agent_assignment_verdict, session_rung
from tests.subscriptions.factories import SubscriptionFactory
from trinity import clock
from trinity import services as trinity_services
from trinity.selectors import system_settings_get

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
THRIFTY, ONLY, PINNED = "thrifty", "subscription-only", "pinned"

PRO = billing.lookup("anthropic", "pro")
ENTERPRISE = billing.lookup("anthropic", "enterprise")  # bills overage
UNCURATED = billing.classify("anthropic", "ultra-9000")
METERED = PlanEntry("anthropic", "metered-x", "Metered", billing.METERED, billing.REFUSE)


def test_the_policy_values_are_the_models_choices() -> None:
    assert {THRIFTY, ONLY, PINNED} == set(RoutingPolicy.values)
    assert (policy.THRIFTY, policy.SUBSCRIPTION_ONLY, policy.PINNED) == (THRIFTY, ONLY, PINNED)


@pytest.mark.parametrize(
    ("provider", "plan_type", "billing_class", "overage", "hard_stop"),
    [
        ("anthropic", "max-20x", "plan", "refuse", True),
        ("anthropic", "pro", "plan", "refuse", True),
        ("anthropic", "enterprise", "plan", "bill_overage", False),
        ("openai-codex", "plus", "plan", "refuse", True),
        ("openai-codex", "enterprise", "plan", "bill_overage", False),
        # Uncurated: metered semantics, never a hard stop.
        ("anthropic", "ultra-9000", "unknown", "unknown", False),
        ("anthropic", "", "unknown", "unknown", False),
        ("openai-codex", "max-20x", "unknown", "unknown", False),  # another provider's type
    ],
)
def test_the_catalog_classifies_every_plan_type_and_an_uncurated_one_is_unknown(
    provider: str, plan_type: str, billing_class: str, overage: str, hard_stop: bool
) -> None:
    entry = billing.classify(provider, plan_type)
    assert (entry.billing_class, entry.overage) == (billing_class, overage)
    assert billing.hard_stop(entry) is hard_stop
    assert (plan_type in billing.hard_stop_plan_types(provider)) is hard_stop


def test_a_metered_entry_that_refuses_is_still_no_hard_stop() -> None:
    assert not billing.hard_stop(METERED)


@pytest.mark.parametrize(
    ("policy_", "key", "pro", "enterprise", "uncurated", "metered"),
    [
        (THRIFTY, True, True, True, True, True),  # fails open: every plan, then the key
        (ONLY, False, True, False, False, False),  # fails closed: hard stops only
        (PINNED, True, True, True, True, True),  # its assignment, whatever it is
    ],
)
def test_what_each_policy_allows(
    policy_: str, key: bool, pro: bool, enterprise: bool, uncurated: bool, metered: bool
) -> None:
    assert policy.key_allowed(policy_) is key
    assert PRO is not None and ENTERPRISE is not None
    allowed = [
        policy.plan_verdict(routing_policy=policy_, plan=_terms(e)).allowed
        for e in (PRO, ENTERPRISE, UNCURATED, METERED)
    ]
    assert allowed == [pro, enterprise, uncurated, metered]


def _terms(entry: PlanEntry, billing_class: str = "", overage: str = "") -> policy.PlanTerms:
    """``entry`` with the columns registration copies from it (or the ones given)."""
    return policy.PlanTerms(entry, billing_class or entry.billing_class, overage or entry.overage)


NOT_A_HARD_STOP = policy.PlanRefusal.NOT_A_HARD_STOP


@pytest.mark.parametrize(
    ("policy_", "plan", "refusal"),
    [
        (THRIFTY, None, None),  # runs on the key or nothing: the key verdict decides
        (PINNED, None, None),
        (ONLY, None, policy.PlanRefusal.NO_PLAN),
        (ONLY, "pro", None),
        (ONLY, "enterprise", NOT_A_HARD_STOP),  # bills overage
        (ONLY, "uncurated", NOT_A_HARD_STOP),  # unknown: no hard stop
        # a curated hard stop whose row says otherwise: the columns must agree
        (ONLY, "pro, overage billed", NOT_A_HARD_STOP),
        (ONLY, "pro, metered", NOT_A_HARD_STOP),
        (THRIFTY, "pro, overage billed", None),
        (PINNED, "enterprise", None),
    ],
)
def test_the_plan_verdict(
    policy_: str, plan: str | None, refusal: policy.PlanRefusal | None
) -> None:
    assert PRO is not None and ENTERPRISE is not None
    terms = {
        "pro": _terms(PRO),
        "enterprise": _terms(ENTERPRISE),
        "uncurated": _terms(UNCURATED),
        "pro, overage billed": _terms(PRO, overage="bill_overage"),
        "pro, metered": _terms(PRO, billing_class=billing.METERED),
    }
    verdict = policy.plan_verdict(routing_policy=policy_, plan=terms[plan] if plan else None)
    assert verdict.refusal is refusal
    assert verdict.allowed is (refusal is None)


@pytest.mark.parametrize("policy_", [THRIFTY, ONLY, PINNED])
def test_the_shortcut_of_the_plan_verdict_is_the_verdict(policy_: str) -> None:
    # ``only_hard_stop`` is the shortcut ``admit`` takes (a plan's terms are read only
    # under a policy that restricts plans); it must refuse what the verdict refuses,
    # for every curated type and an uncurated one.
    entries = [*billing.CATALOG.values(), UNCURATED]
    verdicts = [policy.plan_verdict(routing_policy=policy_, plan=_terms(e)) for e in entries]
    refused = [e for e, verdict in zip(entries, verdicts, strict=True) if not verdict.allowed]
    if policy.only_hard_stop(policy_):
        assert refused == [e for e in entries if not billing.hard_stop(e)]
        assert refused  # the catalog has plans that bill overage
    else:
        assert refused == []


@pytest.mark.parametrize(
    ("policy_", "auto_switch", "refusal"),
    [
        (THRIFTY, True, None),
        (ONLY, True, None),
        (PINNED, True, policy.LeaveRefusal.PINNED),
        # the admin's switch first: it holds every agent, pinned or not
        (THRIFTY, False, policy.LeaveRefusal.AUTO_SWITCH_OFF),
        (ONLY, False, policy.LeaveRefusal.AUTO_SWITCH_OFF),
        (PINNED, False, policy.LeaveRefusal.AUTO_SWITCH_OFF),
    ],
)
def test_the_leave_verdict(
    policy_: str, auto_switch: bool, refusal: policy.LeaveRefusal | None
) -> None:
    verdict = policy.leave_verdict(routing_policy=policy_, auto_switch=auto_switch)
    assert verdict.refusal is refusal
    assert verdict.allowed is (refusal is None)


def test_each_leave_refusal_is_the_walks_stop_of_the_same_name() -> None:
    for refusal in policy.LeaveRefusal:
        assert Stop(refusal.value).name == refusal.name


@pytest.mark.parametrize(
    ("policy_", "auto_switch", "assigned", "kind", "previous", "target"),
    [
        (THRIFTY, True, 1, "subscription", 2, 2),  # served elsewhere: stay there
        (ONLY, True, 1, "subscription", 2, 2),
        (THRIFTY, True, 1, "subscription", 1, None),  # on its assignment: nothing to do
        (THRIFTY, True, 1, "api_key", None, None),  # the key is never sticky
        (ONLY, True, 1, "api_key", None, None),
        (THRIFTY, True, 1, "", None, None),  # a legacy row without a kind
        (PINNED, True, 1, "subscription", 2, None),  # never leaves its assignment
        (THRIFTY, False, 1, "subscription", 2, None),  # auto-switch off: the same
        (THRIFTY, True, None, "subscription", 2, None),  # no assignment to fall back on
    ],
)
def test_the_affinity_rule(
    policy_: str,
    auto_switch: bool,
    assigned: int | None,
    kind: str,
    previous: int | None,
    target: int | None,
) -> None:
    assert (
        policy.affinity_target(
            policy=policy_,
            auto_switch=auto_switch,
            assigned_id=assigned,
            previous_kind=kind,
            previous_subscription_id=previous,
        )
        == target
    )


# The reads around the rules (database)


def _plan(name: str, plan_type: str) -> Subscription:
    entry = billing.classify("anthropic", plan_type)
    return SubscriptionFactory.create(
        name=name, plan_type=plan_type, billing_class=entry.billing_class, overage=entry.overage
    )


@pytest.mark.django_db
class TestPolicyReads:
    @pytest.fixture
    def plans(self) -> dict[str, Subscription]:
        plans = {
            "max": _plan("max", "max-20x"),
            "pro": _plan("pro", "pro"),
            "ent": _plan("ent", "enterprise"),
        }
        # A row whose type is no longer curated, though registration once copied
        # plan/refuse onto it: the catalog decides.
        plans["stale"] = SubscriptionFactory.create(
            name="stale", plan_type="legacy-tier", billing_class="plan", overage="refuse"
        )
        return plans

    @pytest.mark.parametrize(
        ("policy_", "expected"),
        [
            (THRIFTY, ["ent", "max", "pro", "stale"]),
            (ONLY, ["max", "pro"]),
            (PINNED, ["ent", "max", "pro", "stale"]),
        ],
    )
    def test_the_candidates_a_policy_walks(
        self, plans: dict[str, Subscription], policy_: str, expected: list[str]
    ) -> None:
        agent = AgentFactory.create(routing_policy=policy_)
        chosen = rank_alternatives(agent=agent, now=T0)
        assert sorted(r.candidate.name for r in chosen.ranked) == expected
        # Every other plan is there too, with the verdict that kept it out.
        refused = {j.candidate.name for j in chosen.excluded if j.verdict.reason is Reason.POLICY}
        assert refused == {"ent", "max", "pro", "stale"} - set(expected)

    def test_the_policy_excludes_in_admit_not_in_the_query(
        self, plans: dict[str, Subscription]
    ) -> None:
        agent = AgentFactory.create(routing_policy=ONLY)
        # The query narrows by provider only: every plan is a candidate.
        assert len(candidates_read(provider="anthropic", now=T0)) == 4
        chosen = rank_alternatives(agent=agent, exclude_ids=[plans["max"].pk], now=T0)
        assert chosen.order() == [plans["pro"].pk]
        reasons = {j.candidate.name: j.verdict.reason for j in chosen.excluded}
        assert reasons == {"ent": Reason.POLICY, "stale": Reason.POLICY, "max": Reason.TRIED}

    @pytest.mark.parametrize(
        ("policy_", "plan", "refused"),
        [
            (THRIFTY, "ent", False),
            (THRIFTY, None, False),
            (PINNED, "stale", False),
            (ONLY, "max", False),
            (ONLY, "ent", True),  # bills overage
            (ONLY, "stale", True),  # uncurated type: unknown
            (ONLY, None, True),  # would run on the key or on nothing
        ],
    )
    def test_the_assignment_gate(
        self, plans: dict[str, Subscription], policy_: str, plan: str | None, refused: bool
    ) -> None:
        agent = AgentFactory.create(
            routing_policy=policy_, subscription=plans[plan] if plan else None
        )
        if plan is None:  # no plan: the policy's own refusal, on the agent
            why = assignment_policy_refusal(agent)
        else:  # a plan: ``admit``'s verdict on the assignment
            verdict = agent_assignment_verdict(agent, now=T0)
            policy_says = isinstance(verdict, Excluded) and verdict.reason is Reason.POLICY
            why = verdict.detail if isinstance(verdict, Excluded) and policy_says else ""
        assert bool(why) is refused
        if refused:
            assert "subscription-only" in why
            assert agent.subscription is None or agent.subscription.token.reveal() not in why

    def test_a_thrifty_agents_start_verdict_reads_no_subscription(
        self, plans: dict[str, Subscription], django_assert_num_queries: Any
    ) -> None:
        agent = AgentFactory.create(routing_policy=THRIFTY, subscription=plans["ent"])
        fresh = Agent.objects.get(pk=agent.pk)
        with django_assert_num_queries(0):
            assert policy.agent_start_verdict(fresh).allowed
        with django_assert_num_queries(1):  # subscription-only reads its plan
            fresh.routing_policy = ONLY
            verdict = policy.agent_start_verdict(fresh)
        assert verdict.refusal is NOT_A_HARD_STOP

    @pytest.mark.parametrize(
        ("policy_", "auto_switch", "stop"),
        [
            (THRIFTY, True, None),
            (PINNED, True, Stop.PINNED),
            (ONLY, False, Stop.AUTO_SWITCH_OFF),
        ],
    )
    def test_the_switching_stop_is_the_leave_verdict(
        self, policy_: str, auto_switch: bool, stop: Stop | None
    ) -> None:
        trinity_services.system_setting_set(name="auto_switch_subscriptions", value=auto_switch)
        agent = AgentFactory.create(routing_policy=policy_)
        assert switching_stop(agent=agent, system=system_settings_get()) is stop

    def test_a_plan_whose_columns_say_it_bills_overage_is_refused_though_its_type_is_curated(
        self,
    ) -> None:
        odd = SubscriptionFactory.create(plan_type="max-20x", overage="bill_overage")
        agent = AgentFactory.create(routing_policy=ONLY, subscription=odd)
        verdict = agent_assignment_verdict(agent, now=T0)
        assert isinstance(verdict, Excluded) and verdict.reason is Reason.POLICY
        assert "overage: bill_overage" in verdict.detail


@pytest.mark.django_db
class TestTheKeyUnderAPolicy:
    @pytest.fixture(autouse=True)
    def key(self) -> None:
        trinity_services.platform_api_key_set(key="sk-ant-api03-" + "k" * 40)

    @pytest.mark.parametrize(("policy_", "open_"), [(THRIFTY, True), (ONLY, False), (PINNED, True)])
    def test_the_key_rung_follows_the_policy(self, policy_: str, open_: bool) -> None:
        agent = AgentFactory.create(routing_policy=policy_)
        system = system_settings_get()
        assert key_rung_available(agent=agent, system=system, now=T0) is open_

    @pytest.mark.parametrize(("policy_", "kind"), [(THRIFTY, RungKind.API_KEY), (ONLY, None)])
    def test_an_agent_without_a_subscription_boots_on_the_key_only_if_its_policy_allows(
        self, policy_: str, kind: RungKind | None
    ) -> None:
        agent: Agent = AgentFactory.create(routing_policy=policy_, use_platform_api_key=True)
        rung = lifecycle.baseline_rung(agent)
        assert (rung.kind if rung is not None else None) is kind
        mode, spec = lifecycle.spawn_spec(agent)
        assert ("ANTHROPIC_API_KEY" in spec.credentials) is (kind is RungKind.API_KEY)
        assert mode == ("api_key" if kind else "none")


@pytest.mark.django_db
class TestAffinityRung:
    """Whether a session may stay on the plan that served its previous turn."""

    @pytest.fixture(autouse=True)
    def empty_cache(self) -> None:
        from django.core.cache import cache

        cache.clear()

    def stays(self, agent: Agent, plan: Subscription) -> bool:
        rung = session_rung(agent, plan.pk, now=clock.now())
        assert rung is None or (rung.kind, rung.subscription_id) == (RungKind.SUBSCRIPTION, plan.pk)
        return rung is not None

    @pytest.mark.parametrize(
        ("five_hour", "stays"),
        [
            (None, True),  # no 5h figure: the weekly one (20 %) decides
            (50.0, True),
            (98.0, True),  # exactly 2 % left: a plan in use holds
            (98.1, False),  # strictly below 2 %: it leaves
        ],
    )
    def test_the_hysteresis_floor_moves_a_session_off_a_nearly_spent_plan(
        self, five_hour: float | None, stays: bool
    ) -> None:
        plan = _plan("max", "max-20x")
        now = clock.now()
        snapshots_write({plan.pk: reading(five_hour=five_hour, now=now)})
        assert self.stays(AgentFactory.create(), plan) is stays

    def test_without_a_reading_the_session_stays_and_a_fresh_refusing_one_moves_it(self) -> None:
        plan = _plan("max", "max-20x")
        agent = AgentFactory.create()
        assert self.stays(agent, plan)
        snapshots_write({plan.pk: limited(now=clock.now())})
        assert not self.stays(agent, plan)

    def test_a_refusal_mark_moves_the_session(self) -> None:
        plan = _plan("max", "max-20x")
        record_rate_limit_event(
            agent_name="other",
            subscription_id=plan.pk,
            error_message="429",
            failure_kind=FailureKind.RATE_LIMIT,
            now=clock.now(),
        )
        assert not self.stays(AgentFactory.create(), plan)

    @pytest.mark.parametrize(
        ("policy_", "plan_type", "stays"),
        [
            (THRIFTY, "enterprise", True),
            (ONLY, "enterprise", False),  # bills overage: never under subscription-only
            (ONLY, "max-20x", True),
        ],
    )
    def test_the_policy_decides_which_plans_a_session_may_stay_on(
        self, policy_: str, plan_type: str, stays: bool
    ) -> None:
        plan = _plan("p", plan_type)
        assert self.stays(AgentFactory.create(routing_policy=policy_), plan) is stays

    def test_a_deleted_plan_keeps_no_session(self) -> None:
        plan = _plan("max", "max-20x")
        agent = AgentFactory.create()
        Subscription.objects.filter(pk=plan.pk).delete()
        assert not self.stays(agent, plan)
