"""A throttle end to end: real agent servers running the real Claude Code CLI, a
throttling front for one plan's token (a 429 with no quota evidence: no unified
headers, only ``x-should-retry``) and the provider simulator behind it for everything
else. The throttled plan backs off for a minute, not the 2h skip window: turns walk
around it meanwhile and it is tried again right after, when a second throttle
doubles the backoff."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from routing.headroom.throttle import THROTTLE
from simulator.control import SimulatorControl
from subscriptions.models import RateLimitEvent
from tests.execution.support import agent_on, messages_sent, register_plan
from trinity import clock
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class _Front(BaseHTTPRequestHandler):
    """Throttles Messages requests carrying ``throttled``; forwards the rest."""

    upstream = ""
    throttled = ""
    refused: list[str] = []

    def _relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        bearer = self.headers.get("authorization", "")
        if self.path.startswith("/v1/messages") and self.throttled and self.throttled in bearer:
            type(self).refused.append(self.path)
            payload = json.dumps(
                {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
            ).encode()
            self._answer(429, {"x-should-retry": "true", "retry-after": "1"}, payload)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        with httpx.Client(timeout=60, trust_env=False) as client:
            answer = client.request(
                self.command, self.upstream + self.path, headers=headers, content=body
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        kept.pop("content-encoding", None)  # httpx decoded the body
        self._answer(answer.status_code, kept, answer.content)

    def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-type", headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_GET = _relay

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def front(control: SimulatorControl, simulator: Any) -> Iterator[type[_Front]]:
    _Front.upstream = simulator.base_url.rstrip("/")
    _Front.throttled = ""
    _Front.refused = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Front)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with override_settings(TRINITY_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{server.server_port}"):
            yield _Front
    finally:
        server.shutdown()
        server.server_close()


def turn(client: APIClient, agent: str) -> dict[str, Any]:
    response = client.post(f"/api/agents/{agent}/task", {"message": "say hi"}, format="json")
    data: dict[str, Any] = response.json()
    data["http_status"] = response.status_code
    return data


def test_a_throttled_plan_backs_off_a_minute_then_is_tried_again_and_doubles(
    front: type[_Front], control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    for name in ("bot", "second", "third"):
        agent_on(owner, a, name=name)
    front.throttled = a_token

    with time_machine.travel(clock.now(), tick=True) as traveller:
        first = turn(owner_client, "bot")
        assert first["http_status"] == 200, first
        assert [(x["name"], x["outcome"]) for x in first["attempts"]] == [
            ("plan-a", "refused"),
            ("plan-b", "served"),
        ]
        # The CLI asked three times (two retries), then reported the throttle.
        assert len(front.refused) == 3
        assert messages_sent(control) == [("plan-b", 200)]
        event = RateLimitEvent.objects.get(subscription=a)
        assert event.limiting_window == THROTTLE and event.resets_at is not None
        assert event.resets_at - event.occurred_at == timedelta(minutes=1)

        # Within the backoff another turn on plan-a goes elsewhere before its attempt.
        traveller.shift(timedelta(seconds=30))
        control.clear_requests()
        during = turn(owner_client, "second")
        assert during["http_status"] == 200, during
        assert [(x["name"], x["why"]) for x in during["attempts"]] == [("plan-b", "pre_dispatch")]
        assert len(front.refused) == 3  # plan-a was not asked

        # Right after the backoff plan-a is tried again; a second throttle doubles it.
        traveller.shift(timedelta(seconds=31))
        after = turn(owner_client, "third")
        assert after["http_status"] == 200, after
        assert [x["name"] for x in after["attempts"]] == ["plan-a", "plan-b"]
        assert len(front.refused) == 6
        second = RateLimitEvent.objects.filter(subscription=a).order_by("-occurred_at").first()
        assert second is not None and second.pk != event.pk
        assert second.resets_at is not None
        assert second.resets_at - second.occurred_at == timedelta(minutes=2)
    # Never the 2h skip window: every event names a reset within minutes.
    assert RateLimitEvent.objects.filter(subscription=a).count() == 2


def test_a_throttle_walks_the_turn_but_commits_no_switch(
    front: type[_Front], control: SimulatorControl, owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    register_plan(control, "plan-b")
    agent = agent_on(owner, a)
    front.throttled = a_token

    with time_machine.travel(clock.now(), tick=True) as traveller:
        walked = turn(owner_client, "bot")
        assert walked["http_status"] == 200, walked
        assert [(x["name"], x["outcome"]) for x in walked["attempts"]] == [
            ("plan-a", "refused"),
            ("plan-b", "served"),
        ]
        switch = walked["subscription_switch"]
        assert switch["committed"] is False and switch["why"]["throttled"] is True, switch
        assert "plan-a throttled" in switch["explanation"], switch
        assert "assignment is unchanged" in switch["explanation"], switch
        agent.refresh_from_db()
        assert agent.subscription_id == a.pk  # the agent stays on its plan
        assert not Notification.objects.filter(kind="subscription_switched").exists()
        detour = Notification.objects.get(kind="throttle_detour")
        assert detour.title == "Turn served by 'plan-b': 'plan-a' was throttled"

        # Within the backoff the next turn is routed around plan-a, still committing nothing.
        traveller.shift(timedelta(seconds=30))
        during = turn(owner_client, "bot")
        assert [(x["name"], x["why"]) for x in during["attempts"]] == [("plan-b", "pre_dispatch")]
        assert during["subscription_switch"]["committed"] is False, during
        agent.refresh_from_db()
        assert agent.subscription_id == a.pk
        assert Notification.objects.filter(kind="throttle_detour").count() == 1  # said once

        # A minute later the throttle is over: the turn runs on plan-a, its own plan.
        front.throttled = ""
        traveller.shift(timedelta(seconds=31))
        control.clear_requests()
        back = turn(owner_client, "bot")
        assert back["http_status"] == 200, back
        assert [(x["name"], x["outcome"]) for x in back["attempts"]] == [("plan-a", "served")]
        assert messages_sent(control) == [("plan-a", 200)]
