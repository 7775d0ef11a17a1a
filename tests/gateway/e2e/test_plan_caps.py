"""A plan's concurrency cap holds for gateway requests too: a request that would
exceed it is routed around it (the planner's Busy), and the slot is given back once
the request ends."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.contrib.auth.models import User

from simulator.control import SimulatorControl
from subscriptions.models import Subscription
from tests.execution.support import register_plan
from tests.gateway.e2e.support import METRICS_TOKEN, Gateway, issue, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def body(session: str, *, stream: bool = False) -> bytes:
    return json.dumps(
        {
            "model": "claude-sonnet-5-5",
            "max_tokens": 16,
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": f"user_x_account__session_{session}"},
        }
    ).encode()


def post(gw: Gateway, key: str, content: bytes) -> httpx.Response:
    headers = {"x-api-key": key, "content-type": "application/json"}
    return httpx.post(gw.url + "/v1/messages", content=content, headers=headers, timeout=30)


def served_by(control: SimulatorControl) -> list[str | None]:
    return [r["credential"] for r in control.requests() if r["path"] == "/v1/messages"]


def test_a_request_past_a_plans_cap_is_served_by_another_plan(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    for name in ("max-a", "max-b"):
        register_plan(control, name)
    Subscription.objects.update(max_concurrency=1)
    key = issue(person)
    control.set_stream_pause(600)  # the first answer streams for seconds
    with ThreadPoolExecutor(1) as background:
        first = background.submit(post, gw, key, body("aaaaaaaa-0001", stream=True))
        wait_for(lambda: served_by(control) or None)  # the first holds its plan's slot
        second = post(gw, key, body("bbbbbbbb-0002"))
        assert second.status_code == 200, second.text
        held, other = served_by(control)
        assert held != other  # one plan, one request at a time
        assert first.result().status_code == 200
    control.set_stream_pause(0)
    streams = httpx.get(
        gw.url + "/internal/streams", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    ).json()
    assert streams == []
    # The slot came back: the first plan serves again.
    assert wait_for(
        lambda: (
            post(gw, key, body("aaaaaaaa-0001")).status_code == 200
            and served_by(control)[-1] == held
            or None
        )
    )
