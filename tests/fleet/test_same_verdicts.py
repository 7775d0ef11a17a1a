"""The benchmark judges with the product: the same facts given to the product's
gatherers (real Postgres and Redis: ``subscriptions/plan_facts.py``) and to the fleet
benchmark's memory (``bench/fleet/memory.py``) give the same verdict on every plan, as
an alternative and as the assignment, and the same order.

Each row is one plan's state (its reading, its refusals); the whole table is one pool
in both. Nothing is judged in either source: both hand their facts to
``routing.eligibility``, which is what this pins."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from agents.models import Agent
from bench.fleet.memory import MemoryPool
from bench.fleet.trace import AgentSpec
from bench.fleet.world import World
from routing.eligibility import Admission, Admitted, Excluded, Role
from routing.headroom.alternatives import Selection
from routing.headroom.reading import Reading
from routing.headroom.windows import family_window
from subscriptions.headroom.selection import agent_admission, rank_alternatives
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, Subscription
from subscriptions.plan_facts import fresh_for, plan_facts_read, skip_window
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from tests.fleet.support import fleet, plan
from tests.headroom.readings import T0, limited, reading, window
from tests.subscriptions.factories import SubscriptionFactory

MINUTE = timedelta(minutes=1)
SONNET_MODEL, OPUS_MODEL = "claude-sonnet-4-5", "claude-opus-4-1"


@dataclass(frozen=True)
class Refusal:
    ago: timedelta
    kind: str = FailureKind.RATE_LIMIT
    resets_in: timedelta | None = None
    window: str = ""
    throttle: bool = False


@dataclass(frozen=True)
class Row:
    """One plan's state: its cached reading and its refusals (oldest first)."""

    name: str
    reading: Reading | None = None
    refusals: tuple[Refusal, ...] = ()
    paused: bool = False


# The table. "a" is the agent's assignment; every row is also judged as one.
ROWS = (
    Row("a", reading(seven_day=50.0)),
    Row("b-measured", reading(seven_day=30.0)),
    Row("c-unknown"),
    Row("d-refusing", limited()),
    Row("e-skip-listed", None, (Refusal(30 * MINUTE),)),
    Row("f-auth", None, (Refusal(10 * MINUTE, kind=FailureKind.AUTH),)),
    Row(
        "g-throttled",
        reading(seven_day=20.0, age=5 * MINUTE),
        (Refusal(timedelta(seconds=30), throttle=True),),
    ),
    Row("h-sonnet-block", reading(), (Refusal(MINUTE, window="seven_day_sonnet"),)),
    Row("i-readmitted", reading(seven_day=10.0, age=MINUTE), (Refusal(30 * MINUTE),)),
    Row("j-reset-passed", None, (Refusal(30 * MINUTE, resets_in=-MINUTE),)),
    Row("k-aged-out", None, (Refusal(2 * 60 * MINUTE + MINUTE),)),
    Row(
        "l-sonnet-reading",
        reading(extra={"seven_day_sonnet": window(100.0, status="rejected")}),
    ),
    Row("m-paused", reading(seven_day=1.0), paused=True),  # the best reading, and paused
)


def _summary(verdict: Admitted | Excluded) -> tuple[Any, ...]:
    if isinstance(verdict, Excluded):
        return (verdict.reason.value, verdict.last_resort, verdict.detail)
    return ("admitted", verdict.tier.value, verdict.readmitted, verdict.forecast_out)


def _selection_summary(selection: Selection, name_of: dict[int, str]) -> dict[str, Any]:
    verdicts = {
        name_of[j.candidate.subscription_id]: _summary(j.verdict) for j in selection.excluded
    }
    ranked = [name_of[r.candidate.subscription_id] for r in selection.ranked]
    for r in selection.ranked:
        verdicts[name_of[r.candidate.subscription_id]] = ("admitted", r.tier.value, r.readmitted)
    return {
        "verdicts": verdicts,
        "ranked": ranked,
        "last_resort": [name_of[c.subscription_id] for c in selection.last_resort],
    }


def _refusals(row: Row) -> list[tuple[Refusal, dict[str, Any]]]:
    return [
        (
            refusal,
            {
                "failure_kind": refusal.kind,
                "resets_at": T0 + refusal.resets_in if refusal.resets_in is not None else None,
                "limiting_window": refusal.window,
                "throttle": refusal.throttle,
                "now": T0 - refusal.ago,
            },
        )
        for refusal in row.refusals
    ]


def _product(model: str) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """The product's gatherers on Postgres and Redis."""
    rows = {
        row.name: SubscriptionFactory.create(
            name=row.name, plan_type="pro", paused_at=T0 - MINUTE if row.paused else None
        )
        for row in ROWS
    }
    snapshots_write({rows[r.name].pk: r.reading for r in ROWS if r.reading is not None})
    for row in ROWS:
        for _, fields in _refusals(row):
            record_rate_limit_event(
                agent_name="someone",
                subscription_id=rows[row.name].pk,
                error_message="429",
                family=family_window(model),
                **fields,
            )
    agent: Agent = AgentFactory.create(name="bot", subscription=rows["a"], model=model)
    name_of = {s.pk: s.name for s in rows.values()}
    selection = rank_alternatives(agent=agent, now=T0, strategy="balanced")
    assigned = {}
    for name, subscription in rows.items():
        facts = plan_facts_read(Subscription.objects.get(pk=subscription.pk))
        admission = agent_admission(agent, now=T0)
        admission = Admission(
            now=T0,
            provider="anthropic",
            origin=subscription.pk,
            family=admission.family,
            max_age=admission.max_age,
            skip_window=admission.skip_window,
        )
        assigned[name] = _summary(admission.judge(facts, Role.ASSIGNED))
    return _selection_summary(selection, name_of), assigned


def _memory(model: str) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """The benchmark's memory, given the same facts."""
    world = World(
        fleet(
            *(plan(row.name, paused=((T0 - MINUTE, None),) if row.paused else ()) for row in ROWS),
            agents=(AgentSpec("bot", model, "a"),),
        )
    )
    ids = {s.name: pk for pk, s in world.subscriptions.items()}
    pool = MemoryPool(world, {"bot": ids["a"]}, strategy="balanced")
    pool.readings_record({ids[r.name]: r.reading for r in ROWS if r.reading is not None})
    for row in ROWS:
        for _, fields in _refusals(row):
            pool.record_refusal(
                credential_kind="subscription",
                subscription_id=ids[row.name],
                family=family_window(model),
                **fields,
            )
    name_of = {pk: name for name, pk in ids.items()}
    family = family_window(model)
    selection = pool.selection(
        Admission(
            now=T0,
            provider="anthropic",
            origin=ids["a"],
            family=family,
            max_age=fresh_for(),
            skip_window=skip_window(),
        )
    )
    assigned = {}
    for name, pk in ids.items():
        admission = Admission(
            now=T0,
            provider="anthropic",
            origin=pk,
            family=family,
            max_age=fresh_for(),
            skip_window=skip_window(),
        )
        assigned[name] = _summary(admission.judge(pool.plan_facts(pk, T0), Role.ASSIGNED))
    return _selection_summary(selection, name_of), assigned


@pytest.mark.django_db
@pytest.mark.parametrize("model", [SONNET_MODEL, OPUS_MODEL])
def test_the_product_and_the_benchmark_judge_the_same_facts_alike(model: str) -> None:
    product_selection, product_assigned = _product(model)
    memory_selection, memory_assigned = _memory(model)

    assert memory_selection == product_selection
    assert memory_assigned == product_assigned
    # The table covers what it claims to: every reason a turn of this model meets.
    reasons = {v[0] for v in product_selection["verdicts"].values()}
    expected = {"admitted", "assigned", "paused", "refusing", "skip_listed", "throttled"}
    if model == SONNET_MODEL:
        expected |= {"family_blocked"}
    assert expected <= reasons
    assigned = {v[0] for v in product_assigned.values()}
    assert assigned >= {"admitted", "paused", "refusing", "throttled"}
