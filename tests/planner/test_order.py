"""The order of a turn as tables: evidence in, the planner's actions out, one row per
stage boundary. No database, no cache, no agent server (``world.py`` answers)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from routing.planner import (
    KEY_RUNG,
    PRE_DISPATCH_STAGE,
    ROUTED_KEY,
    ROUTED_PLAN,
    Ask,
    Evidence,
    Fail,
    Finish,
    KeyState,
    Need,
    Notice,
    Park,
    Previous,
    Send,
    TurnFacts,
    plan,
)
from routing.rung import RungKind
from routing.walk import Stop, Why
from tests.planner.world import (
    AUTH,
    MODEL,
    ORIGIN,
    RATE_LIMITED,
    RESET,
    SERVED,
    T0,
    THROTTLED,
    UPSTREAM,
    BudgetSpent,
    World,
    drive,
    plan_rung,
    turn,
)

ORIGIN_KEY = plan_rung(ORIGIN).key
REFUSING_ALL = {plan_rung(pk).key: [RATE_LIMITED] for pk in (1, 2, 3)}


def test_a_plain_turn_is_sent_on_its_assignment_and_finishes_without_a_switch() -> None:
    run = drive(World())

    assert run.sent_on == ["plan-1"]
    assert run.sends[0].why is Why.ASSIGNED and not run.sends[0].routed
    assert run.end == Finish(plan_rung(ORIGIN), Why.ASSIGNED, None, None, plain=True)
    # A served turn reads only the breaker, readiness, the assignment's evidence and its
    # entry in the week plan (none here).
    assert [n.ask for n in run.needs] == [Ask.BREAKER, Ask.READY, Ask.ASSIGNED, Ask.PLANNED]


# The breaker, before anything is sent


def test_an_open_breaker_fails_the_turn_before_anything_is_sent() -> None:
    run = drive(World(admitted=False, refusing=True))

    assert run.sends == []
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("upstream_error", "provider_outage")
    assert "the turn was not sent" in run.end.detail
    assert [n.ask for n in run.needs] == [Ask.BREAKER]


def test_a_provider_failure_that_opens_the_breaker_is_not_retried() -> None:
    run = drive(World(breaker_fails=True, outcomes={ORIGIN_KEY: [UPSTREAM]}))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Fail) and run.end.walk_stop == "provider_outage"
    assert "the turn met it" in run.end.detail


def test_the_breaker_is_read_again_before_the_walks_next_rung() -> None:
    run = drive(World(breaker_opens_later=True, outcomes={ORIGIN_KEY: [RATE_LIMITED]}))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Fail) and run.end.walk_stop == "provider_outage"
    assert len(run.records) == 1  # the refusal was recorded before the walk stopped


def test_an_agent_that_cannot_start_fails_container_fault() -> None:
    run = drive(World(ready="the agent could not start: no image"))

    assert run.sends == []
    assert run.end == Fail(
        error_code="container_fault", detail="the agent could not start: no image"
    )


# Switching stops: pinned, auto-switch off


@pytest.mark.parametrize("stop", [Stop.PINNED, Stop.AUTO_SWITCH_OFF])
def test_an_agent_that_may_not_switch_never_walks_nor_routes(stop: Stop) -> None:
    world = World(refusing=True, switching_stop=stop, outcomes={ORIGIN_KEY: [RATE_LIMITED]})
    run = drive(world)

    assert run.sent_on == ["plan-1"]  # known not to serve, still sent as assigned
    assert len(run.records) == 1  # its refusal is still recorded
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", stop.value)


# Pre-dispatch and the forecast


def test_an_assignment_known_not_to_serve_starts_on_the_best_alternative() -> None:
    run = drive(World(refusing=True))

    assert run.sent_on == ["plan-2"]
    assert (run.sends[0].why, run.sends[0].routed) == (Why.PRE_DISPATCH, ROUTED_PLAN)
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert run.end.switch.commit and run.end.switch.reason["why"] == "pre_dispatch"


def test_an_assignment_known_not_to_serve_starts_on_the_key_when_no_plan_is_viable() -> None:
    run = drive(World(refusing=True, ranked=(), outcomes={KEY_RUNG.key: [SERVED]}))

    assert run.sends[0].rung == KEY_RUNG
    assert (run.sends[0].why, run.sends[0].routed) == (Why.API_KEY, ROUTED_KEY)
    assert isinstance(run.end, Finish) and run.end.notice is Notice.API_KEY_ROUTE
    assert run.end.switch is not None and not run.end.switch.commit  # the key commits nothing


@pytest.mark.parametrize(
    ("world", "sent_on", "why"),
    [
        # Forecast to run out: moved to a plan that is not running out.
        (World(forecast_out=True), ["plan-2"], Why.PRE_DISPATCH),
        # The alternative runs out too: the turn stays (it still serves now).
        (World(forecast_out=True, forecast_out_of=frozenset({2})), ["plan-1"], Why.ASSIGNED),
        # No plan to move to: never the billed key for a plan that still serves.
        (World(forecast_out=True, ranked=()), ["plan-1"], Why.ASSIGNED),
    ],
)
def test_a_forecast_out_plan_is_routed_around_only_to_a_plan_not_running_out(
    world: World, sent_on: list[str], why: Why
) -> None:
    run = drive(world)

    assert run.sent_on == sent_on
    assert run.sends[0].why is why


def test_a_failed_pre_dispatch_read_dispatches_as_assigned() -> None:
    agent = World().agent()
    opened = Evidence(turn=turn(), admitted=True, ready="", agent=agent)
    reading = plan(replace(opened, assigned=World(refusing=True).assigned()), now=T0)
    assert reading == Need(Ask.SETTINGS, stage=PRE_DISPATCH_STAGE)

    # The same turn once a read of the stage failed (a database error): it is skipped.
    skipped = replace(opened, skipped=frozenset({PRE_DISPATCH_STAGE}))
    assert plan(skipped, now=T0) == Send(plan_rung(ORIGIN), Why.ASSIGNED)


# Session affinity comes before pre-dispatch


def test_a_session_starts_on_the_plan_that_served_its_previous_turn() -> None:
    world = World(refusing=True, previous=Previous("subscription", 3))
    run = drive(world, turn(session="s1"))

    assert run.sent_on == ["plan-3"]  # not plan-2, where pre-dispatch would go
    assert run.sends[0].why is Why.AFFINITY
    assert isinstance(run.end, Finish) and run.end.switch is None  # a session commits nothing
    assert Ask.ASSIGNED not in [n.ask for n in run.needs]


def test_a_session_whose_plan_is_not_eligible_falls_to_pre_dispatch() -> None:
    world = World(refusing=True, previous=Previous("subscription", 3), affinity_ok=False)
    run = drive(world, turn(session="s1"))

    assert run.sent_on == ["plan-2"]
    assert run.sends[0].why is Why.PRE_DISPATCH


def test_a_sessions_plan_that_refuses_goes_back_to_the_assignment() -> None:
    world = World(previous=Previous("subscription", 3), outcomes={plan_rung(3).key: [RATE_LIMITED]})
    run = drive(world, turn(session="s1"))

    assert run.sent_on == ["plan-3", "plan-1"]
    assert run.sends[1].why is Why.ASSIGNED
    assert isinstance(run.end, Finish) and run.end.switch is None


def test_the_key_is_never_sticky_for_a_session() -> None:
    run = drive(World(previous=Previous("api_key", None)), turn(session="s1"))

    assert run.sent_on == ["plan-1"]
    assert Ask.AFFINITY_PLAN not in [n.ask for n in run.needs]


# Concurrency caps


def test_a_plan_at_its_cap_is_routed_around_to_the_next_plan() -> None:
    run = drive(World(at_cap=frozenset({1})))

    assert run.sent_on == ["plan-1", "plan-2"]  # the first was refused its lease, unsent
    assert (run.sends[1].why, run.sends[1].routed) == (Why.AT_CAPACITY, ROUTED_PLAN)
    assert isinstance(run.end, Finish) and run.end.switch is None  # busy is not failing


def test_every_plan_at_its_cap_routes_to_the_key() -> None:
    run = drive(World(at_cap=frozenset({1, 2, 3}), outcomes={KEY_RUNG.key: [SERVED]}))

    assert run.sends[-1].rung == KEY_RUNG
    assert (run.sends[-1].why, run.sends[-1].routed) == (Why.AT_CAPACITY, ROUTED_KEY)


def test_a_plan_at_its_cap_with_nowhere_to_go_fails_unsent() -> None:
    run = drive(World(at_cap=frozenset({1, 2, 3}), key=KeyState(False)))

    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", "at_capacity")
    assert run.end.detail.startswith("plan-1 is serving its concurrency cap")


def test_a_pinned_agent_at_its_cap_is_not_routed_around() -> None:
    run = drive(World(at_cap=frozenset({1}), switching_stop=Stop.PINNED))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Fail) and run.end.walk_stop == "at_capacity"


# The walk and the key rung's gates


def test_a_refused_plan_walks_to_the_best_alternative_and_commits_it() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [RATE_LIMITED]}))

    assert run.sent_on == ["plan-1", "plan-2"]
    assert run.sends[1].why is Why.RANKED
    assert len(run.records) == 1 and run.records[0].refusal.failure_kind == "rate_limit"
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert run.end.switch.commit
    assert run.end.switch.reason["refused"] == "plan-1 refused"


def test_a_throttle_walks_the_turn_but_commits_no_switch() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [THROTTLED]}))

    assert run.sent_on == ["plan-1", "plan-2"]
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert not run.end.switch.commit
    assert run.end.switch.reason["throttled"] is True
    assert run.end.switch.reason["refused"] == "plan-1 throttled"
    assert run.end.notice is Notice.THROTTLE_DETOUR


def test_a_throttled_assignment_commits_no_switch_though_another_plan_refused_after() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [THROTTLED], plan_rung(2).key: [RATE_LIMITED]}))

    assert run.sent_on == ["plan-1", "plan-2", "plan-3"]
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert not run.end.switch.commit  # the assignment itself was only throttled


def test_routing_around_a_throttles_backoff_commits_no_switch() -> None:
    run = drive(World(refusing=True, throttled=True))

    assert run.sent_on == ["plan-2"]
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert not run.end.switch.commit
    assert run.end.notice is Notice.THROTTLE_DETOUR


def test_every_plan_refusing_walks_to_the_key() -> None:
    run = drive(World(outcomes={**REFUSING_ALL, KEY_RUNG.key: [SERVED]}))

    assert run.sent_on == ["plan-1", "plan-2", "plan-3", "platform API key"]
    assert run.sends[-1].why is Why.API_KEY
    assert isinstance(run.end, Finish) and run.end.notice is Notice.API_KEY_ROUTE


@pytest.mark.parametrize(
    "world",
    [
        World(outcomes=REFUSING_ALL, key=KeyState(False)),  # fallback off, opted out, ...
        World(outcomes=REFUSING_ALL, key_configured=False),  # offered, but no key to send
    ],
)
def test_a_closed_key_rung_exhausts_the_walk(world: World) -> None:
    run = drive(world)

    assert run.sent_on == ["plan-1", "plan-2", "plan-3"]
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", "exhausted")
    assert run.end.exhausted and run.end.notify_exhausted
    assert run.end.resets_at == RESET  # the earliest reset a refusal carried


def test_a_subscription_only_agent_is_told_it_never_uses_the_key() -> None:
    world = World(outcomes=REFUSING_ALL, key=KeyState(False), routing_policy="subscription-only")
    run = drive(world)

    assert isinstance(run.end, Fail)
    assert run.end.detail.endswith("never uses the platform API key.")


def test_a_consumed_key_budget_says_which_budget_kept_the_key_out() -> None:
    spent = BudgetSpent()
    run = drive(World(outcomes=REFUSING_ALL, key=KeyState(False, spent)))

    assert isinstance(run.end, Fail)
    assert run.end.walk_stop == "key_budget"
    assert run.end.key_closed is spent
    assert run.end.resets_at == min(RESET, spent.reopens_at)
    assert "every plan refused and the platform key's daily budget" in run.end.detail


def test_a_key_reservation_a_budget_refuses_fails_billing_unsent() -> None:
    spent = BudgetSpent()
    run = drive(World(outcomes=REFUSING_ALL, reserve_closed=spent))

    assert run.sends[-1].rung == KEY_RUNG
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", "key_budget")
    assert run.end.detail.endswith(", so the key was not sent.")
    assert run.end.resets_at == RESET


def test_a_key_reservation_refused_parks_an_autonomous_turn_until_a_plan_resets() -> None:
    world = World(outcomes=REFUSING_ALL, reserve_closed=BudgetSpent())
    run = drive(world, turn(autonomous=True, waits=True))

    assert isinstance(run.end, Park)
    assert (run.end.until, run.end.walk_stop) == (RESET, "key_budget")


def test_a_policy_that_forbids_the_assignment_routes_to_a_plan_it_allows() -> None:
    world = World(routing_policy="subscription-only", policy_refusal="its plan bills overage")
    run = drive(world)

    assert run.sent_on == ["plan-2"]
    assert (run.sends[0].why, run.sends[0].routed) == (Why.POLICY, ROUTED_PLAN)


def test_a_policy_with_no_plan_it_allows_refuses_the_turn() -> None:
    world = World(
        routing_policy="subscription-only", policy_refusal="its plan bills overage", ranked=()
    )
    run = drive(world)

    assert run.sends == []
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", "policy")
    assert (
        run.end.detail
        == "Agent 'bot': its plan bills overage, and no plan it allows can serve now."
    )


# A rule that forbids the assignment (paused by an admin): never sent there


@pytest.mark.parametrize(
    ("ranked", "sent_on", "why"),
    [((2, 3), ["plan-2"], Why.PRE_DISPATCH), ((), ["platform API key"], Why.API_KEY)],
)
def test_a_paused_assignment_is_left_for_the_best_plan_or_the_key(
    ranked: tuple[int, ...], sent_on: list[str], why: Why
) -> None:
    run = drive(World(paused=True, ranked=ranked))

    assert run.sent_on == sent_on
    assert run.sends[0].why is why and run.sends[0].routed
    # Its row said so when the agent was ready: no cache read of the assignment.
    assert Ask.ASSIGNED not in [n.ask for n in run.needs]
    assert isinstance(run.end, Finish)
    if ranked:
        switch = run.end.switch
        assert switch is not None and switch.commit  # the agent moves off the paused plan
        assert switch.reason["refused"] == "its subscription 'plan-1' is paused"


@pytest.mark.parametrize("stop", [Stop.PINNED, Stop.AUTO_SWITCH_OFF])
def test_a_paused_assignment_of_an_agent_that_may_not_leave_it_refuses_the_turn_unsent(
    stop: Stop,
) -> None:
    run = drive(World(paused=True, switching_stop=stop))

    assert run.sends == []
    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.walk_stop) == ("billing", "paused")
    assert run.end.detail == (
        "Agent 'bot': its subscription 'plan-1' is paused, and no other credential it may "
        "use can serve now."
    )


def test_a_paused_assignment_with_nothing_to_take_the_turn_refuses_it() -> None:
    run = drive(World(paused=True, ranked=(), key=KeyState(False)))

    assert run.sends == []
    assert isinstance(run.end, Fail) and run.end.walk_stop == "paused"


# The single retry after a provider error


def test_a_provider_error_is_sent_once_more_on_the_same_rung() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [UPSTREAM, SERVED]}))

    assert run.sent_on == ["plan-1", "plan-1"]
    assert [s.retry for s in run.sends] == [False, True]
    assert run.records == []  # a provider error is recorded against no credential
    assert isinstance(run.end, Finish) and run.end.why is Why.ASSIGNED


def test_a_second_provider_error_ends_the_turn_without_walking() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [UPSTREAM, UPSTREAM]}))

    assert run.sent_on == ["plan-1", "plan-1"]
    assert run.end == Fail(error_code="upstream_error", detail="upstream 503")


def test_no_retry_without_the_reissue_floor_of_the_budget_left() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [UPSTREAM]}), turn(budget=20))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Fail) and run.end.error_code == "upstream_error"


def test_a_refusal_that_is_not_about_the_credential_never_walks() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [MODEL]}))

    assert run.sent_on == ["plan-1"]
    assert run.end == Fail(error_code="model_unsupported", detail="model not found")


# Legacy agent servers (no override echo)


def test_a_legacy_agent_applies_the_next_rung_by_assignment() -> None:
    run = drive(World(legacy=True, outcomes={ORIGIN_KEY: [RATE_LIMITED]}))

    assert run.sent_on == ["plan-1", "plan-2"]
    assert [s.reassign for s in run.sends] == [False, True]
    assert isinstance(run.end, Finish) and run.end.switch is not None
    assert not run.end.switch.commit  # committed as it was applied


def test_a_legacy_agent_is_never_offered_the_key() -> None:
    world = World(legacy=True, outcomes=REFUSING_ALL, key=KeyState(True))
    run = drive(world)

    assert KEY_RUNG not in [s.rung for s in run.sends]
    assert isinstance(run.end, Fail) and run.end.walk_stop == "exhausted"
    assert Ask.KEY not in [n.ask for n in run.needs]


# An exhausted walk: park or fail; the bounds


def test_an_exhausted_autonomous_turn_parks_until_the_earliest_known_reset() -> None:
    world = World(outcomes=REFUSING_ALL, key=KeyState(False))
    run = drive(world, turn(autonomous=True, waits=True))

    assert isinstance(run.end, Park)
    assert (run.end.until, run.end.walk_stop, run.end.exhausted) == (RESET, "exhausted", True)


@pytest.mark.parametrize(
    "facts",
    [
        turn(autonomous=False, waits=True),  # someone waits for the answer
        turn(autonomous=True, waits=False),  # its wait policy fails fast
    ],
)
def test_an_exhausted_turn_that_may_not_wait_fails(facts: TurnFacts) -> None:
    run = drive(World(outcomes=REFUSING_ALL, key=KeyState(False)), facts)

    assert isinstance(run.end, Fail) and run.end.walk_stop == "exhausted"


def test_dead_credentials_only_fail_auth_and_never_park() -> None:
    dead = {plan_rung(pk).key: [AUTH] for pk in (1, 2, 3)}
    run = drive(World(outcomes=dead, key=KeyState(False)), turn(autonomous=True, waits=True))

    assert isinstance(run.end, Fail)
    assert (run.end.error_code, run.end.resets_at) == ("auth", None)


def test_the_rung_cap_stops_the_walk() -> None:
    # The cap is fixed when the walk starts: the pool's size then, plus two. A pool read
    # as empty (plans added since) caps the walk at two rungs.
    world = World(pool_size=0, outcomes=REFUSING_ALL, key=KeyState(False))
    run = drive(world)

    assert run.sent_on == ["plan-1", "plan-2"]
    assert isinstance(run.end, Fail)
    assert (run.end.walk_stop, run.end.exhausted) == ("rung_cap", True)


def test_the_time_budget_stops_the_walk() -> None:
    run = drive(World(outcomes={ORIGIN_KEY: [RATE_LIMITED]}), turn(budget=30))

    assert run.sent_on == ["plan-1"]
    assert isinstance(run.end, Fail) and run.end.walk_stop == "budget"
    assert run.end.detail.endswith("the turn's time budget ran out before another try.")


def test_nothing_is_sent_with_less_than_a_second_left() -> None:
    run = drive(World(), turn(budget=0.5))

    assert run.sends == []
    assert isinstance(run.end, Fail) and run.end.error_code == "timeout"


def test_a_concurrent_switch_is_followed_once() -> None:
    run = drive(World(current=3, outcomes={ORIGIN_KEY: [RATE_LIMITED]}))

    assert run.sent_on == ["plan-1", "plan-3"]
    assert run.sends[1].why is Why.CONCURRENT_SWITCH


def test_a_plan_serving_an_agent_on_the_key_owes_the_return_notice() -> None:
    run = drive(World(on_api_key=True))

    assert isinstance(run.end, Finish)
    assert (run.end.notice, run.end.plain) == (Notice.SUBSCRIPTION_RETURN, False)


def test_a_plan_whose_secret_is_gone_is_not_sent() -> None:
    run = drive(World(refusing=True, no_secret=frozenset({2})))

    assert run.sent_on == ["plan-1"]  # pre-dispatch found no rung: dispatch as assigned
    assert run.sends[0].rung is not None and run.sends[0].rung.kind is RungKind.SUBSCRIPTION


def test_time_moves_only_through_now() -> None:
    later = T0 + timedelta(seconds=590)
    run = drive(World(outcomes={ORIGIN_KEY: [RATE_LIMITED]}), now=later)

    assert isinstance(run.end, Fail) and run.end.walk_stop == "budget"
