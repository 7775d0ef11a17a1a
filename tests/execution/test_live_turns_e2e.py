"""Live turns end to end: the real agent server running the real Claude Code CLI
against the simulator, the real database and cache; the client reads the turn's
Server-Sent Events from the API (``docs/flows/live-turns.md``)."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from execution.models import Execution, ExecutionEvent, Status
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.execution.live_support import Event, body_events, kinds, walk_of
from tests.execution.support import agent_on, register_plan, wait_until
from tests.procs import alive, cmdline, descendants_of

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LONG_COMMAND = "echo waiting; sleep 300; echo done"


def _stream(client: APIClient, path: str, **body: object) -> list[Event]:
    response = client.post(path, {**body, "stream": True}, format="json")
    return list(body_events(response))


def _replay(client: APIClient, execution_id: str, last_event_id: str | None = None) -> list[Event]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    path = f"/api/executions/{execution_id}/events"
    return list(body_events(client.get(path, headers=headers)))


def test_a_streamed_turns_text_reaches_the_client_before_the_turn_ends(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent_on(owner, plan)
    control.set_stream_pause(150)  # a slow model: the answer's words come over time
    response = owner_client.post(
        "/api/agents/bot/task", {"message": "say hi", "stream": True}, format="json"
    )
    execution_id = response["X-Execution-Id"]
    status_at_first_text = None
    events = []
    for event in body_events(response):
        if event.kind == "text" and status_at_first_text is None:
            status_at_first_text = Execution.objects.get(pk=execution_id).status
        events.append(event)

    assert status_at_first_text == Status.RUNNING
    assert kinds(events)[:2] == ["turn", "sent"] and kinds(events)[-2:] == ["served", "end"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    text = "".join(e.data["text"] for e in events if e.kind == "text")
    end = events[-1].data
    assert end["status"] == "succeeded" and text.strip() and end["response"].strip()
    assert end["served_by"] == {"kind": "subscription", "name": "plan-a"}


def test_a_walk_mid_turn_shows_as_events_in_order_and_replays_the_same(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    plan_a, token_a = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent_on(owner, plan_a)
    control.set_usage(token_a, "five_hour", percent=100)

    events = _stream(owner_client, "/api/agents/bot/task", message="say hi")

    assert walk_of(events) == [
        ("turn", ""),
        ("sent", "plan-a"),
        ("refused", "plan-a"),
        ("walking", "plan-b"),
        ("sent", "plan-b"),
        ("served", "plan-b"),
        ("committed", ""),
        ("end", ""),
    ]
    refused = next(e for e in events if e.kind == "refused")
    assert refused.data["error_code"] == "rate_limit" and refused.data["resets_at"]
    # Each text belongs to its attempt: the refused one's (the CLI's own words of the
    # limit) is superseded by the walk, the served one's is the answer.
    texts = {
        n: "".join(e.data["text"] for e in events if e.kind == "text" and e.data["attempt"] == n)
        for n in (1, 2)
    }
    assert "limit" in texts[1] and texts[2]
    execution_id = events[0].data["execution_id"]
    replayed = _replay(owner_client, execution_id)
    assert [(e.seq, e.kind, e.data) for e in replayed] == [(e.seq, e.kind, e.data) for e in events]
    assert ExecutionEvent.objects.filter(execution_id=execution_id).count() == len(events)


def test_last_event_id_resumes_without_loss_or_duplicates(
    control: SimulatorControl, owner: User, owner_client: APIClient, other_client: APIClient
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent_on(owner, plan)
    events = _stream(owner_client, "/api/agents/bot/chat", message="say hi")
    execution_id = events[0].data["execution_id"]

    for cut in (1, 3, len(events) - 1):
        resumed = _replay(owner_client, execution_id, str(cut))
        assert [(e.seq, e.data) for e in resumed] == [(e.seq, e.data) for e in events[cut:]]
    by_query = list(body_events(owner_client.get(f"/api/executions/{execution_id}/events?after=2")))
    assert [e.seq for e in by_query] == [e.seq for e in events[2:]]
    # Another operator's turn is not theirs to read; a bad resume point is a 400.
    assert other_client.get(f"/api/executions/{execution_id}/events").status_code == 404
    bad = owner_client.get(f"/api/executions/{execution_id}/events", HTTP_LAST_EVENT_ID="x")
    assert bad.status_code == 400 and "after" in bad.json()
    assert events[-1].data["session_id"] == events[0].data["session_id"]


def _sleeps(root_pid: int) -> list[int]:
    return [p.pid for p in descendants_of(root_pid) if b"sleep" in cmdline(p.pid)]


def test_cancel_during_a_long_tool_call_kills_the_cli_and_its_tools(
    control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent = agent_on(owner, plan)
    Agent.objects.filter(pk=agent.pk).update(allowed_tools=["Bash"])
    # The CLI's Bash refuses a bare long sleep; a command that sleeps inside runs.
    control.arm_red_team(trigger="LONG-TOOL", reads=[], commands=[LONG_COMMAND])
    response = owner_client.post(
        "/api/agents/bot/task", {"message": "LONG-TOOL: wait", "stream": True}, format="json"
    )
    execution_id = response["X-Execution-Id"]
    events = body_events(response)
    seen = []
    for event in events:
        seen.append(event)
        if event.kind == "tool_call":
            break
    assert seen[-1].kind == "tool_call" and "sleep 300" in seen[-1].data["input"]
    server = int(Agent.objects.get(pk=agent.pk).process_handle)
    sleeps = wait_until(lambda: _sleeps(server), seconds=30, what="the tool's sleep")

    cancelled_at = time.monotonic()
    answer = owner_client.post(f"/api/executions/{execution_id}/cancel")
    assert answer.status_code == 200, answer.content
    rest = list(events)

    wait_until(lambda: not any(alive(p) for p in sleeps), seconds=2, what="the sleep to die")
    assert time.monotonic() - cancelled_at < 2.5
    assert not [p for p in descendants_of(server) if alive(p.pid) and b"claude" in cmdline(p.pid)]
    assert rest[-1].kind == "end" and rest[-1].data["status"] == "cancelled"
    assert "refused" not in kinds(rest)
    row = Execution.objects.get(pk=execution_id)
    assert (row.status, row.error_code) == (Status.CANCELLED, "cancelled")
    assert row.cancel_requested_at is not None and row.key_reservation is None
    assert not RateLimitEvent.objects.exists()
    assert Agent.objects.get(pk=agent.pk).subscription_id == plan.pk
    again = owner_client.post(f"/api/executions/{execution_id}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "finished"


def test_a_queued_turn_is_cancelled_before_it_starts(
    control: SimulatorControl, owner: User, owner_client: APIClient, other_client: APIClient
) -> None:
    from execution import services

    plan, _ = register_plan(control, "plan-a")
    agent = agent_on(owner, plan)
    queued = services.execution_create(agent=agent, message="later", trigger="api", queued=True)
    assert other_client.post(f"/api/executions/{queued.pk}/cancel").status_code == 404

    answer = owner_client.post(f"/api/executions/{queued.pk}/cancel")

    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    assert services.execution_run_queued(execution_id=str(queued.pk)) == "not_queued"
    assert kinds(_replay(owner_client, str(queued.pk))) == ["turn", "end"]
    assert not control.requests()
