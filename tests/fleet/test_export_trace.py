"""``manage.py export_trace`` writes this install's turns in the format the bench reads."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bench.fleet.engine import simulate
from bench.fleet.project import ProjectPolicy
from bench.fleet.trace import LIST_PRICES, PLAN_CAPACITY, Request, trace_read
from execution.management.commands import export_trace
from execution.models import Execution, Status
from subscriptions.models import HeadroomSample, Subscription
from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory

SINCE = datetime(2030, 3, 4, 8, 0, tzinfo=UTC)
SONNET, OPUS = "claude-sonnet-4-5", "claude-opus-4-1"


def execution(agent, *, at: datetime, tokens: int, trigger: str = "api", **extra) -> Execution:
    return Execution.objects.create(
        agent=agent,
        agent_name=agent.name,
        trigger=trigger,
        message="hello",
        status=Status.SUCCEEDED if tokens else Status.FAILED,
        input_tokens=tokens,
        output_tokens=0,
        created_at=at,
        **extra,
    )


@pytest.fixture
def install(db):
    max_plan = SubscriptionFactory.create(name="max", plan_type="max-20x")
    pro = SubscriptionFactory.create(name="pro", plan_type="pro")
    SubscriptionFactory.create(name="codex", provider="openai-codex", plan_type="plus")
    worker = AgentFactory.create(name="worker", model=SONNET, subscription=max_plan)
    helper = AgentFactory.create(name="helper", model=OPUS, subscription=pro)
    HeadroomSample.objects.create(
        subscription=max_plan,
        fetched_at=SINCE - timedelta(minutes=3),
        status="ok",
        windows={
            "five_hour": {
                "utilization": 40.0,
                "resets_at": (SINCE + timedelta(hours=2)).isoformat(),
                "status": "allowed",
            },
            "seven_day": {
                "utilization": 70.0,
                "resets_at": (SINCE + timedelta(days=2)).isoformat(),
                "status": "allowed",
            },
        },
    )
    # pro answers "invalid token" mid-span and never answers again: revoked.
    HeadroomSample.objects.create(
        subscription=pro, fetched_at=SINCE + timedelta(hours=1), status="ok"
    )
    HeadroomSample.objects.create(
        subscription=pro, fetched_at=SINCE + timedelta(hours=3), status="invalid_token"
    )
    execution(worker, at=SINCE - timedelta(hours=1), tokens=999)  # before the span
    execution(
        worker,
        at=SINCE + timedelta(minutes=5),
        tokens=30_000,
        attempts=[
            {"credential_kind": "subscription", "subscription_id": max_plan.pk, "why": "assigned"}
        ],
    )
    execution(helper, at=SINCE + timedelta(minutes=10), tokens=50_000, trigger="schedule")
    execution(helper, at=SINCE + timedelta(hours=4), tokens=0, trigger="schedule")  # failed
    execution(worker, at=SINCE + timedelta(hours=5), tokens=20_000, model=OPUS)
    return max_plan, pro


def test_export_trace_writes_a_trace_the_bench_reads_and_replays(install, tmp_path: Path):
    path = tmp_path / "export.jsonl"
    until = SINCE + timedelta(days=1)
    call_command(
        "export_trace",
        since=SINCE.isoformat(),
        until=until.isoformat(),
        output=str(path),
        key_usd_per_mtok=4.0,
        stderr=io.StringIO(),
    )
    trace = trace_read(path)
    fleet = trace.fleet
    assert (fleet.start, fleet.end, fleet.key_usd_per_mtok) == (SINCE, until, 4.0)
    assert fleet.key_prices == {}  # one price given: every model bills at it
    assert [s.name for s in fleet.subscriptions] == ["max", "pro"]  # Anthropic plans only
    max_plan, pro = fleet.subscriptions
    capacity = PLAN_CAPACITY["max-20x"]["seven_day"]
    assert max_plan.windows["seven_day"].used == int(capacity * 0.7)
    assert max_plan.windows["five_hour"].first_reset == SINCE + timedelta(hours=2)
    assert pro.revoked_at == SINCE + timedelta(hours=3)
    assert {(a.name, a.model, a.subscription) for a in fleet.agents} == {
        ("worker", SONNET, "max"),
        ("helper", OPUS, "pro"),
    }
    assert [(t.agent, t.tokens, t.trigger, t.model) for t in trace.turns] == [
        ("worker", 30_000, "api", None),
        ("helper", 50_000, "schedule", None),
        # A turn that failed before it spent anything gets the served turns' median.
        ("helper", 30_000, "schedule", None),
        ("worker", 20_000, "api", OPUS),
    ]
    # The install keeps a turn's total: one request at its start.
    assert all(t.requests == (Request(0.0, t.tokens),) for t in trace.turns)
    assert max_plan.added_at is None and pro.added_at is None
    run = simulate(trace, ProjectPolicy)
    assert run.metrics.completed + run.metrics.failed == 4


def test_export_trace_refuses_a_naive_instant(db):
    with pytest.raises(CommandError, match="timezone"):
        call_command("export_trace", since="2030-03-04T08:00:00", stdout=io.StringIO())


def test_export_trace_writes_to_standard_output_by_default(install):
    out = io.StringIO()
    call_command("export_trace", since="2030-03-04", until="2030-03-05", stdout=out)
    lines = out.getvalue().splitlines()
    # From midnight: the turn an hour before SINCE is in the span too.
    assert len(lines) == 1 + 5


def test_export_trace_prices_the_key_per_family_and_dates_a_plan_added_in_the_span(
    install, tmp_path: Path
):
    added = SubscriptionFactory.create(name="new", plan_type="max-5x")
    later = SubscriptionFactory.create(name="later", plan_type="pro")
    # created_at is auto_now_add: set after the row exists.
    Subscription.objects.filter(pk=added.pk).update(created_at=SINCE + timedelta(hours=6))
    Subscription.objects.filter(pk=later.pk).update(created_at=SINCE + timedelta(days=2))
    path = tmp_path / "export.jsonl"
    until = SINCE + timedelta(days=1)
    call_command(
        "export_trace",
        since=SINCE.isoformat(),
        until=until.isoformat(),
        output=str(path),
        stderr=io.StringIO(),
    )
    fleet = trace_read(path).fleet
    assert fleet.key_prices == LIST_PRICES
    # "later" was registered after the span: it is not in it.
    assert [s.name for s in fleet.subscriptions] == ["max", "new", "pro"]
    new = fleet.subscriptions[1]
    assert new.added_at == SINCE + timedelta(hours=6)
    assert not new.present(SINCE) and new.present(until - timedelta(seconds=1))
    # Its windows start when it was added, with nothing used.
    assert new.windows["seven_day"].first_reset == new.added_at + timedelta(days=7)
    assert new.windows["seven_day"].used == 0


def test_the_exporters_list_prices_are_the_benchs():
    """bench/ is not in the backend image, so the exporter carries its own copy."""
    assert export_trace.LIST_PRICES == LIST_PRICES


def test_two_owners_agents_of_one_name_are_two_trace_agents(db, tmp_path: Path):
    """Names are unique per owner only: two owners' "bot" (different models) are two
    agents of the trace, each with its own turns, and a deleted "bot" a third."""
    alice, bob = (AgentFactory.create(name="bot", model=m) for m in (SONNET, OPUS))
    gone = AgentFactory.create(name="bot", model=SONNET)
    execution(alice, at=SINCE + timedelta(minutes=1), tokens=1_000)
    execution(bob, at=SINCE + timedelta(minutes=2), tokens=2_000)
    # A deleted agent's model is known only from its turns.
    execution(gone, at=SINCE + timedelta(minutes=3), tokens=3_000, model=SONNET)
    gone.delete()
    AgentFactory.create(name="solo", model=SONNET)  # no turn: not in the trace
    path = tmp_path / "export.jsonl"
    call_command(
        "export_trace",
        since=SINCE.isoformat(),
        until=(SINCE + timedelta(days=1)).isoformat(),
        output=str(path),
        stderr=io.StringIO(),
    )
    trace = trace_read(path)
    a, b = (f"bot@{agent.owner.username}" for agent in (alice, bob))
    assert {(x.name, x.model) for x in trace.fleet.agents} == {
        (a, SONNET),
        (b, OPUS),
        ("bot (deleted)", SONNET),
    }
    assert [(t.agent, t.tokens, t.model) for t in trace.turns] == [
        (a, 1_000, None),
        (b, 2_000, None),
        ("bot (deleted)", 3_000, None),
    ]
