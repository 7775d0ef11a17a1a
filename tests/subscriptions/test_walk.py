"""The walk's decision core as tables: rung order, the gates, every bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routing.attempt_refusal import AttemptRefusal
from routing.eligibility import Candidate
from routing.headroom.alternatives import Selection
from routing.headroom.classification import NO_EVIDENCE, Tier
from routing.headroom.ranking import Ranked
from routing.headroom.recovery import Verdict
from routing.rung import RungKind
from routing.walk import (
    KEY_RATE_LIMIT_PAUSE,
    LAST_RESORT_MIN_AGE_AUTONOMOUS,
    REISSUE_FLOOR,
    REISSUE_SLACK,
    Pick,
    Stop,
    Walk,
    Why,
    key_refused_recently,
    pre_dispatch_pick,
    walk_next,
    walk_start,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RATE_LIMIT = AttemptRefusal("rate_limit", "rate_limit", "rate limit")
AUTH = AttemptRefusal("auth", "auth", "auth")
MODEL = AttemptRefusal("model_unsupported", None, "model rejected")
ORIGIN = 1


def ranked(pk: int, *, readmitted: Verdict | None = None) -> Ranked:
    return Ranked(Candidate(pk, f"plan-{pk}", 0), Tier.UNKNOWN, NO_EVIDENCE, readmitted)


def last_resort(pk: int, failed_ago: timedelta) -> Candidate:
    return Candidate(pk, f"plan-{pk}", 0, T0 - failed_ago)


def selection(*ranked_: Ranked, last: tuple[Candidate, ...] = ()) -> Selection:
    return Selection(ranked=tuple(ranked_), last_resort=last, now=T0)


EMPTY = selection()


def walk(
    *, autonomous: bool = False, subscriptions: int = 3, budget: timedelta | None = None
) -> Walk:
    state = walk_start(
        origin=ORIGIN,
        autonomous=autonomous,
        subscription_count=subscriptions,
        deadline=T0 + (timedelta(minutes=10) if budget is None else budget),
    )
    refused_origin(state)
    return state


def refused_origin(state: Walk, pk: int = ORIGIN, reason: str = "rate limit") -> None:
    state.record(
        kind=RungKind.SUBSCRIPTION,
        subscription_id=pk,
        name=f"plan-{pk}",
        why=Why.ASSIGNED,
        served=False,
        reason=reason,
    )


def next_of(
    state: Walk,
    sel: Selection,
    *,
    key: bool = False,
    refusal: AttemptRefusal = RATE_LIMIT,
    **kw: object,
) -> Pick | Stop:
    return walk_next(state, refusal=refusal, selection=sel, key_available=key, now=T0, **kw)  # type: ignore[arg-type]


def test_a_ranked_untried_subscription_comes_first() -> None:
    assert next_of(walk(), selection(ranked(2), ranked(3))) == Pick(
        RungKind.SUBSCRIPTION, 2, "plan-2", Why.RANKED
    )


def test_a_readmitted_candidate_says_so() -> None:
    picked = next_of(walk(), selection(ranked(2, readmitted=Verdict.WINDOW_RESET)))
    assert isinstance(picked, Pick) and picked.why is Why.READMITTED


def test_ranked_before_last_resort_before_the_key() -> None:
    state = walk()
    sel = selection(ranked(2), last=(last_resort(3, timedelta(hours=1)),))
    assert next_of(state, sel, key=True).subscription_id == 2  # type: ignore[union-attr]
    sel = selection(last=(last_resort(3, timedelta(hours=1)),))
    assert next_of(state, sel, key=True) == Pick(
        RungKind.SUBSCRIPTION, 3, "plan-3", Why.LAST_RESORT
    )
    assert next_of(state, EMPTY, key=True) == Pick(
        RungKind.API_KEY, None, "platform API key", Why.API_KEY
    )


@pytest.mark.parametrize(
    ("autonomous", "failed_ago", "takes_it"),
    [
        (False, timedelta(minutes=1), True),  # interactive: any untried one
        (True, LAST_RESORT_MIN_AGE_AUTONOMOUS - timedelta(seconds=1), False),
        (True, LAST_RESORT_MIN_AGE_AUTONOMOUS, True),  # the edge: exactly 30 minutes old
        (True, LAST_RESORT_MIN_AGE_AUTONOMOUS + timedelta(seconds=1), True),
    ],
)
def test_the_autonomous_last_resort_gate(
    autonomous: bool, failed_ago: timedelta, takes_it: bool
) -> None:
    picked = next_of(walk(autonomous=autonomous), selection(last=(last_resort(3, failed_ago),)))
    assert (isinstance(picked, Pick) and picked.subscription_id == 3) is takes_it
    if not takes_it:
        assert picked is Stop.EXHAUSTED


def test_an_autonomous_turn_skips_a_fresh_last_resort_for_an_older_one() -> None:
    sel = selection(
        last=(last_resort(3, timedelta(minutes=5)), last_resort(4, timedelta(minutes=45)))
    )
    assert next_of(walk(autonomous=True), sel).subscription_id == 4  # type: ignore[union-attr]


def test_the_key_rung_only_when_available_and_untried() -> None:
    state = walk()
    assert next_of(state, EMPTY, key=False) is Stop.EXHAUSTED
    state.record(
        kind=RungKind.API_KEY, subscription_id=None, name="", why=Why.API_KEY, served=False
    )
    assert next_of(state, EMPTY, key=True) is Stop.EXHAUSTED


def test_a_pick_already_tried_means_exhausted() -> None:
    state = walk()
    refused_origin(state, 2)
    assert next_of(state, selection(ranked(2), ranked(3))) is Stop.ALREADY_TRIED


def test_only_quota_and_credential_refusals_walk() -> None:
    assert next_of(walk(), selection(ranked(2)), refusal=MODEL) is Stop.NOT_A_CREDENTIAL_REFUSAL
    assert isinstance(next_of(walk(), selection(ranked(2)), refusal=AUTH), Pick)


def test_an_agent_without_a_subscription_never_walks() -> None:
    state = walk_start(
        origin=None, autonomous=False, subscription_count=3, deadline=T0 + timedelta(minutes=10)
    )
    assert next_of(state, selection(ranked(2)), key=True) is Stop.NO_SUBSCRIPTION


@pytest.mark.parametrize(
    ("subscriptions", "refusals", "expected"),
    [
        (1, 1, "walks"),  # cap 3: origin tried, two more rungs allowed
        (1, 2, "walks"),
        (1, 3, Stop.RUNG_CAP),  # exactly at the cap
        (3, 4, "walks"),
        (3, 5, Stop.RUNG_CAP),
    ],
)
def test_the_rung_cap_is_subscriptions_plus_two(
    subscriptions: int, refusals: int, expected: object
) -> None:
    state = walk(subscriptions=subscriptions)
    for pk in range(2, refusals + 1):
        refused_origin(state, pk)
    assert state.rung_cap == subscriptions + 2
    picked = next_of(state, selection(ranked(99)))
    assert isinstance(picked, Pick) if expected == "walks" else picked is expected


@pytest.mark.parametrize(
    ("left", "walks"),
    [
        (REISSUE_FLOOR + REISSUE_SLACK + timedelta(seconds=1), True),
        (REISSUE_FLOOR + REISSUE_SLACK, True),  # the edge: exactly the floor left
        (REISSUE_FLOOR + REISSUE_SLACK - timedelta(seconds=1), False),
        (timedelta(0), False),
    ],
)
def test_no_reissue_below_the_time_floor(left: timedelta, walks: bool) -> None:
    picked = next_of(walk(budget=left), selection(ranked(2)))
    assert isinstance(picked, Pick) if walks else picked is Stop.BUDGET


def test_a_concurrent_switch_reruns_once_on_the_new_baseline() -> None:
    state = walk()
    sel = selection(ranked(2))
    first = next_of(state, sel, current_assignment=7, current_name="plan-7")
    assert first == Pick(RungKind.SUBSCRIPTION, 7, "plan-7", Why.CONCURRENT_SWITCH)
    state.record(
        kind=RungKind.SUBSCRIPTION,
        subscription_id=7,
        name="plan-7",
        why=Why.CONCURRENT_SWITCH,
        served=False,
        reason="rate limit",
    )
    # once only: the next refusal walks the ranking, never re-runs a second time
    assert next_of(state, sel, current_assignment=8, current_name="plan-8").subscription_id == 2  # type: ignore[union-attr]


def test_an_unmoved_assignment_is_no_concurrent_switch() -> None:
    picked = next_of(walk(), selection(ranked(2)), current_assignment=ORIGIN)
    assert isinstance(picked, Pick) and picked.why is Why.RANKED


def test_the_trail_names_each_credential_and_why_it_failed() -> None:
    state = walk()
    state.record(
        kind=RungKind.SUBSCRIPTION,
        subscription_id=2,
        name="plan-2",
        why=Why.RANKED,
        served=False,
        reason="auth",
    )
    state.record(
        kind=RungKind.API_KEY,
        subscription_id=None,
        name="platform API key",
        why=Why.API_KEY,
        served=False,
        reason="billing",
    )
    assert state.trail_text() == (
        "Tried: plan-1 (rate limit) -> plan-2 (auth) -> platform API key (billing)"
    )
    assert state.tried == [1, 2] and state.key_tried


def test_a_codex_walks_trail_names_the_openai_key() -> None:
    state = walk_start(
        origin=ORIGIN, autonomous=False, subscription_count=1, deadline=T0 + timedelta(minutes=10)
    )
    state.record(
        kind=RungKind.API_KEY,
        subscription_id=None,
        name="OpenAI platform key",
        why=Why.API_KEY,
        served=False,
        reason="billing",
    )
    assert state.trail_text() == "Tried: OpenAI platform key (billing)"


def test_pre_dispatch_routes_to_the_best_alternative_else_the_key_else_nowhere() -> None:
    state = walk_start(
        origin=ORIGIN, autonomous=False, subscription_count=3, deadline=T0 + timedelta(minutes=10)
    )
    assert pre_dispatch_pick(
        state, selection=selection(ranked(2)), key_available=True, now=T0
    ) == Pick(RungKind.SUBSCRIPTION, 2, "plan-2", Why.RANKED)
    key = pre_dispatch_pick(state, selection=EMPTY, key_available=True, now=T0)
    assert key is not None and key.kind is RungKind.API_KEY
    assert pre_dispatch_pick(state, selection=EMPTY, key_available=False, now=T0) is None


def test_pre_dispatch_never_routes_to_a_skip_listed_plan() -> None:
    state = walk_start(
        origin=ORIGIN, autonomous=False, subscription_count=3, deadline=T0 + timedelta(minutes=10)
    )
    sel = selection(last=(last_resort(3, timedelta(hours=1)),))
    assert pre_dispatch_pick(state, selection=sel, key_available=False, now=T0) is None
    key = pre_dispatch_pick(state, selection=sel, key_available=True, now=T0)
    assert key is not None and key.kind is RungKind.API_KEY


@pytest.mark.parametrize(
    ("kind", "ago", "closed"),
    [
        ("rate_limit", KEY_RATE_LIMIT_PAUSE - timedelta(seconds=1), True),
        ("rate_limit", KEY_RATE_LIMIT_PAUSE, False),  # the edge: a burst is over
        ("auth", timedelta(hours=1), True),  # dead or out of credit: the whole window
        (None, timedelta(hours=1), True),  # a legacy row of unknown kind closes it too
    ],
)
def test_a_key_refusal_closes_its_rung_for_its_kind(
    kind: str | None, ago: timedelta, closed: bool
) -> None:
    assert key_refused_recently(failure_kind=kind, occurred_at=T0 - ago, now=T0) is closed
