"""The walk end to end: the REST API, a real agent server running the real Claude Code
CLI, the provider simulator and the real database. Which credential served each
attempt is read from the simulator's request log, not from our own records."""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent
from execution.models import Execution
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import FailureKind, RateLimitEvent, Subscription
from tests.execution.support import (
    agent_on,
    cli_child,
    messages_sent,
    register_plan,
    task,
    turn_in_background,
)
from tests.headroom.readings import limited
from trinity import clock
from trinity import services as trinity_services
from trinity.models import Notification
from trinity_contract.proof import health_proof

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Plan = Callable[..., tuple[Subscription, str]]


@pytest.fixture
def plan(control: SimulatorControl) -> Plan:
    """Register a plan subscription with the simulator and the platform."""
    return lambda name: register_plan(control, name)


@pytest.fixture
def key(control: SimulatorControl) -> Callable[[float], str]:
    def make(credit_usd: float) -> str:
        value = "sk-ant-api03-" + uuid.uuid4().hex * 2
        control.register(value, kind="api_key", label="platform-key", credit_usd=credit_usd)
        trinity_services.platform_api_key_set(key=value)
        return value

    return make


def exhaust(control: SimulatorControl, token: str) -> None:
    control.set_usage(token, "five_hour", percent=100)


def test_a_refused_turn_completes_on_a_never_failed_alternative(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    b, _ = plan("plan-b")
    agent = agent_on(owner, a)
    exhaust(control, a_token)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert body["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 200)]
    assert [(x["name"], x["outcome"], x["why"]) for x in body["attempts"]] == [
        ("plan-a", "refused", "assigned"),
        ("plan-b", "served", "ranked"),
    ]
    switch = body["subscription_switch"]
    assert switch["from"] == a.pk and switch["to"] == b.pk and switch["committed"]
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk and agent.last_switch["to"] == b.pk
    event = RateLimitEvent.objects.get()
    assert (event.subscription_id, event.failure_kind) == (a.pk, FailureKind.RATE_LIMIT)
    notice = Notification.objects.get(kind="subscription_switched")
    assert notice.title == "Subscription auto-switched to 'plan-b'"
    # The next turn runs on the committed assignment straight away.
    control.clear_requests()
    assert task(owner_client)["http_status"] == 200
    assert messages_sent(control) == [("plan-b", 200)]


def test_a_refused_turn_completes_on_a_readmitted_subscription(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    b, _ = plan("plan-b")
    agent_on(owner, a)
    exhaust(control, a_token)
    # plan-b refused 40 minutes ago, and that refusal said its quota returns 10 minutes ago.
    now = clock.now()
    subscription_services.record_rate_limit_event(
        agent_name="other",
        subscription_id=b.pk,
        error_message="429",
        failure_kind=FailureKind.RATE_LIMIT,
        resets_at=now - timedelta(minutes=10),
        now=now - timedelta(minutes=40),
    )

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 200)]
    assert body["attempts"][-1]["why"] == "readmitted"


def test_when_every_plan_refuses_the_key_serves_and_the_assignment_stays(
    plan: Plan,
    key: Callable[[float], str],
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
) -> None:
    a, a_token = plan("plan-a")
    _, b_token = plan("plan-b")
    agent = agent_on(owner, a)
    key(50)
    exhaust(control, a_token)
    exhaust(control, b_token)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert body["served_by_kind"] == "api_key" and body["served_by_subscription"] is None
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 429), ("platform-key", 200)]
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk and agent.on_api_key_since is not None
    assert Notification.objects.filter(kind="api_key_route").count() == 1
    assert not Notification.objects.filter(kind="subscription_switched").exists()
    assert body["subscription_switch"]["explanation"] == (
        "plan-a refused; plan-b refused; the turn ran on the platform API key, billed per "
        "token (the assignment is unchanged)."
    )

    # A second key-served turn says nothing new; once the plan serves again the
    # operator hears what the key cost meanwhile.
    assert task(owner_client)["served_by_kind"] == "api_key"
    assert Notification.objects.filter(kind="api_key_route").count() == 1
    control.set_usage(a_token, "five_hour", percent=0)
    RateLimitEvent.objects.all().delete()  # the skip-list would otherwise still hold
    from django.core.cache import cache

    cache.clear()
    back = task(owner_client)
    assert back["served_by_subscription"] == {"id": a.pk, "name": "plan-a"}, back
    returned = Notification.objects.get(kind="subscription_return")
    assert returned.title == "Back on subscription 'plan-a'"
    assert returned.data["turns_on_key"] == 2


def test_an_exhausted_walk_fails_honestly_with_the_trail_and_a_future_reset(
    plan: Plan,
    key: Callable[[float], str],
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
) -> None:
    a, a_token = plan("plan-a")
    _, b_token = plan("plan-b")
    agent_on(owner, a)
    key_value = key(0)  # a key with no credit
    exhaust(control, a_token)
    exhaust(control, b_token)

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert body["error_code"] == "billing"
    assert body["error_detail"] == (
        "Tried: plan-a (rate limit) -> plan-b (rate limit) -> platform API key (billing); "
        "every candidate refused."
    )
    assert body["earliest_reset"] is not None
    assert datetime.fromisoformat(body["earliest_reset"]) > clock.now()
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 429), ("platform-key", 400)]
    assert RateLimitEvent.objects.filter(credential_kind="api_key").count() == 1
    assert Notification.objects.filter(kind="pool_exhausted").count() == 1
    # One alert per agent per hour, however many turns fail.
    control.clear_requests()
    assert task(owner_client)["http_status"] == 429
    assert Notification.objects.filter(kind="pool_exhausted").count() == 1
    # The refused key is not re-tried for 2h, so the second turn never bills it.
    assert ("platform-key", 400) not in messages_sent(control)
    assert key_value not in str(body)


def test_an_auth_refusal_walks(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    plan("plan-b")
    agent_on(owner, a)
    control.revoke(a_token)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    # The CLI itself retries a 401 once before it reports it.
    assert messages_sent(control) in (
        [("plan-a", 401), ("plan-b", 200)],
        [("plan-a", 401), ("plan-a", 401), ("plan-b", 200)],
    )
    assert RateLimitEvent.objects.get().failure_kind == FailureKind.AUTH


def test_a_model_rejection_never_walks(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = plan("plan-a")
    plan("plan-b")
    agent = agent_on(owner, a)

    body = task(owner_client, model="claude-nope-9")

    assert body["http_status"] == 422 and body["error_code"] == "model_unsupported"
    assert [c for c, _ in messages_sent(control)] == ["plan-a"]
    assert not RateLimitEvent.objects.exists()
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk


def test_a_killed_runtime_never_walks(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = plan("plan-a")
    plan("plan-b")
    agent = agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200  # the server is up
    agent.refresh_from_db()
    control.clear_requests()
    control.set_latency(30_000)  # the upstream hangs: the CLI is mid-turn when killed
    thread, body = turn_in_background(owner_client)
    os.killpg(cli_child(agent), signal.SIGKILL)
    thread.join(timeout=60)
    control.set_latency(0)

    assert body["error_code"] == "runtime_killed", body
    assert [c for c, _ in messages_sent(control)] in ([], ["plan-a"])
    assert not RateLimitEvent.objects.exists()
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk


def test_a_known_refusing_plan_is_routed_around_before_the_first_attempt(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, _ = plan("plan-a")
    b, _ = plan("plan-b")
    agent_on(owner, a)
    snapshots_write({a.pk: limited(now=clock.now())})  # a fresh reading says it refuses

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-b", 200)]  # plan-a was never sent
    assert body["attempts"][0]["why"] == "pre_dispatch"
    assert not RateLimitEvent.objects.exists()  # nothing failed, so nothing is recorded


def test_with_auto_switch_off_the_refusal_is_recorded_and_nothing_switches(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    plan("plan-b")
    agent = agent_on(owner, a)
    trinity_services.system_setting_set(name="auto_switch_subscriptions", value=False)
    exhaust(control, a_token)

    body = task(owner_client)

    assert body["http_status"] == 429 and body["error_code"] == "billing"
    assert body["walk_stop"] == "auto_switch_off"
    assert messages_sent(control) == [("plan-a", 429)]
    assert RateLimitEvent.objects.get().subscription_id == a.pk
    agent.refresh_from_db()
    assert agent.subscription_id == a.pk
    assert not Notification.objects.filter(kind="subscription_switched").exists()


def test_a_chat_session_resumes_on_the_credential_it_walked_to(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    b, _ = plan("plan-b")
    agent_on(owner, a)
    first = owner_client.post("/api/agents/bot/chat", {"message": "remember: teal"}, format="json")
    assert first.status_code == 200, first.content
    session_id = first.json()["session_id"]
    assert first.json()["served_by_subscription"]["name"] == "plan-a"
    exhaust(control, a_token)
    control.clear_requests()

    second = owner_client.post(
        "/api/agents/bot/chat", {"message": "what colour?", "session_id": session_id}, format="json"
    )

    assert second.status_code == 200, second.content
    assert second.json()["session_id"] == session_id
    assert second.json()["served_by_subscription"]["name"] == "plan-b"
    served = [r for r in control.requests() if r["path"] == "/v1/messages" and r["stream"]]
    assert served[-1]["credential"] == "plan-b"
    # The resumed turn carried the first exchange: the session went with the walk.
    assert served[-1]["messages"] >= 3
    assert Execution.objects.filter(session_id=session_id).count() == 2


class _LegacyAgentServer(BaseHTTPRequestHandler):
    """An agent server from before ``auth_override``: it ignores the field, echoes no
    ``X-Trinity-Auth-Override`` and runs every turn on the token it was last given
    (its boot token, then whatever reload-token sent). Plan A's token is exhausted.
    It does prove the agent's secret on /health: nothing is sent to a server that
    cannot."""

    exhausted: str = ""
    current: str = ""
    secret: str = ""
    turns: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        nonce = parse_qs(urlsplit(self.path).query).get("nonce", [""])[0]
        proof = health_proof(secret=type(self).secret, nonce=nonce)
        self._answer(
            200,
            {"status": "ok", "runtime": "claude-code", "model": None, "busy": 0, "proof": proof},
        )

    def _answer(self, status: int, body: dict[str, object]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/api/credentials/reload-token":
            type(self).current = body["token"]
            self._answer(200, {"status": "ok", "reloaded": True, "env_shadow": []})
            return
        type(self).turns.append(self.current)
        if self.current == self.exhausted:
            self._answer(
                429,
                {
                    "error_code": "rate_limit",
                    "detail": "You've hit your limit",
                    "execution_id": body["execution_id"],
                },
            )
            return
        self._answer(
            200,
            {
                "execution_id": body["execution_id"],
                "response": "hi",
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 3, "output_tokens": 2},
                "cost_usd": None,
            },
        )

    def log_message(self, *args: object) -> None:
        pass


def test_a_legacy_agent_server_walks_by_assignment_and_never_to_the_key(
    plan: Plan, key: Callable[[float], str], owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    b, b_token = plan("plan-b")
    key(50)  # available, but a legacy server never gets the key rung
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LegacyAgentServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _LegacyAgentServer.exhausted = _LegacyAgentServer.current = a_token
    _LegacyAgentServer.turns = []
    agent = agent_on(owner, a)
    _LegacyAgentServer.secret = agent.shared_secret.reveal()
    Agent.objects.filter(pk=agent.pk).update(
        endpoint=f"http://127.0.0.1:{server.server_address[1]}", process_state="running"
    )
    try:
        body = task(owner_client)
    finally:
        server.shutdown()
        server.server_close()

    assert body["http_status"] == 200, body
    # It ran on A, was moved to B by assignment and hot-reload, then ran on B.
    assert _LegacyAgentServer.turns == [a_token, b_token]
    assert [(x["name"], x["legacy"]) for x in body["attempts"]] == [
        ("plan-a", True),
        ("plan-b", True),
    ]
    assert body["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk
    assert Notification.objects.filter(kind="subscription_switched").count() == 1
    assert RateLimitEvent.objects.get().subscription_id == a.pk


def test_a_refusal_after_a_concurrent_switch_reruns_on_the_new_baseline_without_a_second_switch(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    b, _ = plan("plan-b")
    c, _ = plan("plan-c")
    agent = agent_on(owner, a)
    assert task(owner_client)["http_status"] == 200  # the server is up
    exhaust(control, a_token)
    control.clear_requests()
    control.set_latency(3_000)  # this turn's attempt on plan-a is in flight...
    thread, body = turn_in_background(owner_client)
    agent.refresh_from_db()
    cli_child(agent)
    # ...when another turn commits plan-c (as a concurrent walk would).
    Agent.objects.filter(pk=agent.pk, subscription_id=a.pk).update(subscription_id=c.pk)
    thread.join(timeout=120)
    control.set_latency(0)

    assert body["http_status"] == 200, body
    assert [(x["name"], x["why"]) for x in body["attempts"]] == [
        ("plan-a", "assigned"),
        ("plan-c", "concurrent_switch"),
    ]
    assert body["subscription_switch"]["committed"] is False
    assert not Notification.objects.filter(kind="subscription_switched").exists()
    agent.refresh_from_db()
    assert agent.subscription_id == c.pk
    assert b.pk not in [x["subscription_id"] for x in body["attempts"]]


def test_a_turn_whose_budget_ran_out_before_a_reissue_is_retryable(
    plan: Plan, control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = plan("plan-a")
    plan("plan-b")
    agent_on(owner, a)
    exhaust(control, a_token)

    # 35 s is exactly the re-issue floor (30 s + 5 s slack): once the refusal on
    # plan-a is back, less than that is left, however fast it came.
    body = task(owner_client, timeout_seconds=35)

    assert body["http_status"] == 503, body
    assert (body["walk_stop"], body["retryable"]) == ("budget", True)
    assert messages_sent(control) == [("plan-a", 429)]
    assert RateLimitEvent.objects.get().subscription_id == a.pk  # still recorded
    assert "time budget ran out" in str(body["error_detail"])
