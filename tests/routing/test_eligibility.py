"""``admit``: facts in, a verdict out, as tables. No database, no cache: the facts are
values, and so are the verdicts (``routing/eligibility.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from routing import policy
from routing.eligibility import (
    Admission,
    Admitted,
    Candidate,
    Excluded,
    PlanFacts,
    Reason,
    Role,
    admit,
    forbidden,
)
from routing.facts import AgentFacts, TurnFacts
from routing.headroom.classification import Tier
from routing.headroom.exhaustion_forecast import Forecast, WindowForecast
from routing.headroom.reading import Reading
from routing.headroom.recovery import Verdict
from routing.headroom.throttle import THROTTLE
from tests.headroom.readings import T0, limited, reading, window

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
ORIGIN, OTHER = 1, 2
SONNET, OPUS = "seven_day_sonnet", "seven_day_opus"
TWO_HOURS = timedelta(hours=2)


def _agent(routing_policy: str = policy.THRIFTY, origin: int | None = ORIGIN) -> AgentFacts:
    return AgentFacts(name="bot", origin=origin, baseline=None, routing_policy=routing_policy)


def _turn(
    *, family: str | None = None, autonomous: bool = False, budget: timedelta = HOUR
) -> TurnFacts:
    return TurnFacts(
        provider="anthropic",
        autonomous=autonomous,
        created_at=T0,
        budget_end=T0 + budget,
        family=family,
    )


def _plan(
    pk: int = OTHER,
    *,
    refused_ago: timedelta | None = None,
    kind: str | None = "rate_limit",
    resets_in: timedelta | None = None,
    window_name: str = "",
    paused: bool = False,
    plan_type: str = "max-20x",
    overage: str = "refuse",
    reading: Reading | None = None,
    forecast: Forecast | None = None,
    at_capacity: bool = False,
    reachable: bool = True,
    present: bool = True,
) -> PlanFacts:
    refused = refused_ago is not None
    candidate = Candidate(
        pk,
        f"plan-{pk}",
        0,
        T0 - refused_ago if refused_ago is not None else None,
        T0 + resets_in if refused and resets_in is not None else None,
        window_name if refused else None,
        kind if refused else None,
        paused,
        plan_type,
        "plan",
        overage,
    )
    return PlanFacts(candidate, reading, forecast, reachable, at_capacity, present)


def _reason(verdict: Admitted | Excluded) -> str:
    return verdict.reason.value if isinstance(verdict, Excluded) else "admitted"


def _judge(
    plan: PlanFacts,
    role: Role,
    *,
    agent: AgentFacts | None = None,
    turn: TurnFacts | None = None,
    tried: frozenset[int] = frozenset(),
) -> Admitted | Excluded:
    return admit(plan, agent or _agent(), turn or _turn(), now=T0, role=role, tried=tried)


def _running_out_in(delay: timedelta) -> Forecast:
    five_hour = WindowForecast(exhausts_at=T0 + delay, burn_per_hour=20.0, resets_at=T0 + 4 * HOUR)
    return Forecast(computed_at=T0, windows={"five_hour": five_hour})


# Every role: a rule first, whatever the plan reads.

RULES = [
    ("paused", _plan(paused=True, reading=reading()), policy.THRIFTY, Reason.PAUSED),
    (
        "paused beats the policy",
        _plan(paused=True, overage="bill"),
        policy.SUBSCRIPTION_ONLY,
        "paused",
    ),
    (
        "overage plan, subscription-only",
        _plan(overage="bill_overage"),
        policy.SUBSCRIPTION_ONLY,
        "policy",
    ),
    (
        "uncurated type, subscription-only",
        _plan(plan_type="legacy"),
        policy.SUBSCRIPTION_ONLY,
        "policy",
    ),
    ("overage plan, thrifty", _plan(overage="bill_overage"), policy.THRIFTY, "admitted"),
    ("overage plan, pinned", _plan(overage="bill_overage"), policy.PINNED, "admitted"),
    ("gone", _plan(present=False), policy.THRIFTY, "absent"),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize(("case", "plan", "routing_policy", "reason"), RULES)
def test_a_rule_excludes_the_plan_in_every_role(
    role: Role, case: str, plan: PlanFacts, routing_policy: str, reason: str
) -> None:
    pk = ORIGIN if role is Role.ASSIGNED else plan.candidate.subscription_id
    facts = plan._replace(candidate=plan.candidate._replace(subscription_id=pk))
    verdict = _judge(facts, role, agent=_agent(routing_policy))

    assert _reason(verdict) == reason, case
    if isinstance(verdict, Excluded):
        assert verdict.forbidden and not verdict.last_resort, case


def test_a_forbidden_assignment_is_known_from_its_row_alone() -> None:
    row = _plan(ORIGIN, paused=True).candidate
    found = forbidden(row, _agent(), _turn(), now=T0)
    assert found is not None and found.reason is Reason.PAUSED
    assert found.detail == "its subscription 'plan-1' is paused"
    assert forbidden(_plan(ORIGIN).candidate, _agent(), _turn(), now=T0) is None
    policy_row = _plan(ORIGIN, overage="bill_overage").candidate
    refused = forbidden(policy_row, _agent(policy.SUBSCRIPTION_ONLY), _turn(), now=T0)
    assert refused is not None and "overage: bill_overage" in refused.detail


# An alternative: offered while nothing says it refuses.

ALTERNATIVES = [
    ("nothing known", _plan(), None, "admitted", False),
    ("measured", _plan(reading=reading(seven_day=40.0)), None, "admitted", False),
    ("the agent's own", _plan(ORIGIN, reading=reading()), None, "assigned", False),
    ("at its cap", _plan(at_capacity=True, reading=reading()), None, "at_capacity", False),
    ("a fresh refusing reading", _plan(reading=limited()), None, "refusing", False),
    (
        "a sonnet-blocked reading, for sonnet",
        _plan(reading=reading(extra={SONNET: window(100.0, status="rejected")})),
        SONNET,
        "family_blocked",
        False,
    ),
    (
        "a sonnet-blocked reading, for opus",
        _plan(reading=reading(extra={SONNET: window(100.0, status="rejected")})),
        OPUS,
        "admitted",
        False,
    ),
    ("refused, nothing readmits", _plan(refused_ago=30 * MINUTE), None, "skip_listed", True),
    (
        "refused, an auth refusal skip-lists too",
        _plan(refused_ago=30 * MINUTE, kind="auth"),
        None,
        "skip_listed",
        True,
    ),
    (
        "a throttle",
        _plan(refused_ago=MINUTE, window_name=THROTTLE, resets_in=MINUTE),
        None,
        "throttled",
        True,
    ),
    (
        "refused for sonnet, a sonnet turn",
        _plan(refused_ago=MINUTE, window_name=SONNET),
        SONNET,
        "family_blocked",
        True,
    ),
    (
        "refused for sonnet, an opus turn",
        _plan(refused_ago=MINUTE, window_name=SONNET),
        OPUS,
        "admitted",
        False,
    ),
    (
        "refused, then a serving reading",
        _plan(refused_ago=30 * MINUTE, reading=reading(age=MINUTE)),
        None,
        "admitted",
        False,
    ),
    (
        "refused, its own reset passed",
        _plan(refused_ago=30 * MINUTE, resets_in=-MINUTE),
        None,
        "admitted",
        False,
    ),
    (
        "refused, its reset is now",
        _plan(refused_ago=30 * MINUTE, resets_in=timedelta(0)),
        None,
        "admitted",
        False,
    ),
    (
        "refused, its reset a second away",
        _plan(refused_ago=30 * MINUTE, resets_in=timedelta(seconds=1)),
        None,
        "skip_listed",
        True,
    ),
    (
        "refused a second inside the window",
        _plan(refused_ago=TWO_HOURS - timedelta(seconds=1)),
        None,
        "skip_listed",
        True,
    ),
    ("refused exactly one window ago", _plan(refused_ago=TWO_HOURS), None, "admitted", False),
]


@pytest.mark.parametrize(("case", "plan", "family", "reason", "last_resort"), ALTERNATIVES)
def test_an_alternative(
    case: str, plan: PlanFacts, family: str | None, reason: str, last_resort: bool
) -> None:
    verdict = _judge(plan, Role.ALTERNATIVE, turn=_turn(family=family))

    assert _reason(verdict) == reason, case
    assert (isinstance(verdict, Excluded) and verdict.last_resort) is last_resort, case


def test_a_readmitted_alternative_says_why_and_a_reset_readmits_as_unknown() -> None:
    by_reading = _judge(
        _plan(refused_ago=30 * MINUTE, reading=reading(seven_day=10.0)), Role.ALTERNATIVE
    )
    assert isinstance(by_reading, Admitted)
    assert (by_reading.tier, by_reading.readmitted) == (Tier.MEASURED, Verdict.SERVING_NOW)
    by_reset = _judge(_plan(refused_ago=30 * MINUTE, resets_in=-MINUTE), Role.ALTERNATIVE)
    assert isinstance(by_reset, Admitted)
    assert (by_reset.tier, by_reset.readmitted) == (Tier.UNKNOWN, Verdict.WINDOW_RESET)


def test_a_tried_plan_is_out_of_the_walk_and_an_autonomous_turn_is_told_it_waits() -> None:
    tried = _judge(_plan(reading=reading()), Role.ALTERNATIVE, tried=frozenset({OTHER}))
    assert _reason(tried) == "tried"
    waits = _judge(_plan(refused_ago=MINUTE), Role.ALTERNATIVE, turn=_turn(autonomous=True))
    assert isinstance(waits, Excluded)
    assert waits.detail.endswith("an autonomous turn waits 30 minutes after a refusal")


def test_an_alternatives_forecast_is_read_only_when_it_was_gathered() -> None:
    running_out = _plan(reading=reading(), forecast=_running_out_in(2 * MINUTE))
    verdict = _judge(running_out, Role.ALTERNATIVE)
    assert isinstance(verdict, Admitted) and verdict.forecast_out
    plain = _judge(running_out._replace(forecast=None), Role.ALTERNATIVE)
    assert isinstance(plain, Admitted) and not plain.forecast_out


# The assignment: sent unless known not to serve.

ASSIGNMENTS = [
    ("nothing known", _plan(ORIGIN), None, "admitted", "no_evidence"),
    ("the cache did not answer", _plan(ORIGIN, reachable=False), None, "admitted", "unreachable"),
    ("a serving reading", _plan(ORIGIN, reading=reading()), None, "admitted", "reading"),
    ("a refusing reading", _plan(ORIGIN, reading=limited()), None, "refusing", "reading"),
    ("a rate-limit mark", _plan(ORIGIN, refused_ago=5 * MINUTE), None, "refusing", "refusal"),
    # An auth refusal is found again by sending: a replaced token serves at once.
    (
        "an auth mark",
        _plan(ORIGIN, refused_ago=5 * MINUTE, kind="auth"),
        None,
        "admitted",
        "no_evidence",
    ),
    (
        "a mark whose reset passed",
        _plan(ORIGIN, refused_ago=5 * MINUTE, resets_in=-MINUTE),
        None,
        "admitted",
        "no_evidence",
    ),
    (
        "a mark one window old",
        _plan(ORIGIN, refused_ago=TWO_HOURS),
        None,
        "admitted",
        "no_evidence",
    ),
    (
        "a serving reading after the mark",
        _plan(ORIGIN, refused_ago=5 * MINUTE, reading=reading(age=MINUTE)),
        None,
        "admitted",
        "reading",
    ),
    (
        "a throttle's backoff",
        _plan(ORIGIN, refused_ago=MINUTE, window_name=THROTTLE, resets_in=MINUTE),
        None,
        "throttled",
        "refusal",
    ),
    (
        "a sonnet mark, a sonnet turn",
        _plan(ORIGIN, refused_ago=MINUTE, window_name=SONNET),
        SONNET,
        "refusing",
        "refusal",
    ),
    (
        "a sonnet mark, an opus turn",
        _plan(ORIGIN, refused_ago=MINUTE, window_name=SONNET),
        OPUS,
        "admitted",
        "no_evidence",
    ),
]


@pytest.mark.parametrize(("case", "plan", "family", "reason", "decided_by"), ASSIGNMENTS)
def test_the_assignment(
    case: str, plan: PlanFacts, family: str | None, reason: str, decided_by: str
) -> None:
    verdict = _judge(plan, Role.ASSIGNED, turn=_turn(family=family))

    assert (_reason(verdict), verdict.decided_by) == (reason, decided_by), case
    if isinstance(verdict, Excluded):
        assert verdict.not_serving and not verdict.forbidden, case


@pytest.mark.parametrize(
    ("runs_out_in", "budget", "out"),
    [
        (3 * MINUTE, HOUR, True),  # before the turn's expected 5 minutes end
        (5 * MINUTE, HOUR, False),  # exactly at the end: not before it
        (3 * MINUTE, 2 * MINUTE, False),  # the turn's budget ends first
    ],
)
def test_an_assignment_forecast_to_run_out_is_admitted_with_the_forecast(
    runs_out_in: timedelta, budget: timedelta, out: bool
) -> None:
    plan = _plan(ORIGIN, reading=reading(), forecast=_running_out_in(runs_out_in))
    verdict = _judge(plan, Role.ASSIGNED, turn=_turn(budget=budget))
    assert isinstance(verdict, Admitted) and verdict.forecast_out is out


def test_only_a_measured_serving_assignment_is_placeable() -> None:
    measured = _judge(_plan(ORIGIN, reading=reading()), Role.ASSIGNED)
    unknown = _judge(_plan(ORIGIN), Role.ASSIGNED)
    assert isinstance(measured, Admitted) and measured.placeable
    assert isinstance(unknown, Admitted) and not unknown.placeable


# The session's plan: the assignment's rule, the hysteresis floor, the forecast.


@pytest.mark.parametrize(
    ("five_hour", "reason"),
    [(50.0, "admitted"), (98.0, "admitted"), (98.1, "spent")],  # 2 % held, below it leaves
)
def test_a_sessions_plan_holds_down_to_the_floor(five_hour: float, reason: str) -> None:
    verdict = _judge(_plan(reading=reading(five_hour=five_hour)), Role.SESSION)
    assert _reason(verdict) == reason


def test_a_sessions_plan_is_left_when_it_refuses_or_runs_out() -> None:
    refusing = _judge(_plan(refused_ago=MINUTE), Role.SESSION)
    running_out = _judge(_plan(reading=reading(), forecast=_running_out_in(MINUTE)), Role.SESSION)
    assert (_reason(refusing), _reason(running_out)) == ("refusing", "forecast_out")


# One judgement, asked one plan at a time or for the whole provider.


def test_the_selection_judges_each_plan_as_admit_does() -> None:
    plans = [
        _plan(pk, refused_ago=ago, reading=found, paused=pk == 7)
        for pk, ago, found in [
            (1, None, reading()),
            (2, None, limited()),
            (3, 30 * MINUTE, None),
            (4, 30 * MINUTE, reading(age=MINUTE)),
            (5, None, None),
            (6, MINUTE, None),
            (7, None, reading()),
        ]
    ]
    admission = Admission.of(_agent(), _turn(), now=T0, tried=frozenset({6}))
    readings = {p.candidate.subscription_id: p.reading for p in plans if p.reading}

    found = admission.alternatives([p.candidate for p in plans], readings)

    one_by_one = [_judge(p, Role.ALTERNATIVE, tried=frozenset({6})) for p in plans]
    measured = [v for group in found.measured.values() for v in group]
    admitted = [*measured, *found.unknown]
    by_plan: dict[Candidate, Admitted | Excluded] = {v.candidate: v for v in admitted}
    by_plan |= {j.candidate: j.verdict for j in found.excluded}
    assert [by_plan[p.candidate] for p in plans] == one_by_one
    assert [v.candidate for v in measured] == [plans[3].candidate]
    assert [v.candidate for v in found.unknown] == [plans[4].candidate]
    assert [_reason(v) for v in one_by_one] == [
        "assigned",
        "refusing",
        "skip_listed",
        "admitted",
        "admitted",
        "tried",
        "paused",
    ]


def test_the_admission_reads_the_turns_facts() -> None:
    turn = _turn(family=SONNET, autonomous=True, budget=2 * MINUTE)
    admission = Admission.of(_agent(policy.SUBSCRIPTION_ONLY), turn, now=T0)
    assert (admission.family, admission.autonomous, admission.hard_stop_only) == (
        SONNET,
        True,
        True,
    )
    assert admission.expected_turn == 2 * MINUTE
    assert (admission.max_age, admission.skip_window) == (turn.fresh_for, turn.skip_window)
