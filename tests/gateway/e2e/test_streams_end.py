"""A stream the client leaves, and a stream whose key is revoked or whose owner is
deactivated, through the real gateway: the upstream stream is closed at once (the
simulator counts it cut), and the usage it had is recorded."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest
from django.contrib.auth.models import User

from gateway.keys import gateway_key_revoke
from gateway.models import GatewayKey, GatewayUsage
from gateway.server.keybook import OWNER_INACTIVE, REVOKED
from simulator.control import SimulatorControl
from tests.execution.support import register_plan
from tests.gateway.e2e.support import METRICS_TOKEN, Gateway, issue, wait_for
from trinity import clock

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

STREAMED = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "a slow answer, please"}],
}


def open_stream(client: httpx.Client, gw: Gateway, key: str) -> httpx.Response:
    request = client.build_request(
        "POST",
        gw.url + "/v1/messages",
        content=json.dumps(STREAMED),
        headers={"x-api-key": key, "content-type": "application/json"},
    )
    return client.send(request, stream=True)


def open_streams(gw: Gateway) -> list[dict[str, object]]:
    answer = httpx.get(
        gw.url + "/internal/streams", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    return list(answer.json())


def test_a_client_that_leaves_mid_stream_closes_the_upstream_and_its_usage_is_kept(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    control.set_stream_pause(400)
    with httpx.Client(timeout=30) as client:
        answer = open_stream(client, gw, issue(person))
        # The iterator is kept: dropping it would close the response (httpx), which is
        # the leaving below, too early.
        chunks = answer.iter_raw()
        assert b"message_start" in next(chunks)
        # The panel's open requests name what serves this one.
        assert [s["served_by"] for s in open_streams(gw)] == ["max-a"]
        answer.close()  # the client leaves with most of the answer unsent

    assert wait_for(lambda: control.streams_cut() == 1 or None)
    row = wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).first())
    assert row.disconnected and row.streamed
    assert row.input_tokens > 0  # message_start's usage was relayed, so it counts


def revoke(person: User) -> None:
    gateway_key_revoke(key=GatewayKey.objects.get(owner=person), now=clock.now())


def deactivate(person: User) -> None:
    # As the admin does it: the key's own row does not change.
    User.objects.filter(pk=person.pk).update(is_active=False)


@pytest.mark.parametrize(("end", "why"), [(revoke, REVOKED), (deactivate, OWNER_INACTIVE)])
def test_a_refused_key_ends_its_open_stream_with_an_error_the_client_reads(
    gw: Gateway,
    control: SimulatorControl,
    person: User,
    end: Callable[[User], None],
    why: str,
) -> None:
    register_plan(control, "max-a")
    control.set_stream_pause(700)
    key = issue(person)
    with httpx.Client(timeout=30) as client:
        answer = open_stream(client, gw, key)
        chunks = answer.iter_raw()
        assert b"message_start" in next(chunks)
        revoked_at = time.monotonic()
        end(person)
        rest = b"".join(chunks)

    # Cut within a poll (a second) and a pause, long before the answer's end (~5 s).
    assert time.monotonic() - revoked_at < 3.5
    assert b"event: error" in rest and b"authentication_error" in rest
    assert why.encode() in rest  # the client is told which refusal ended it
    assert b"message_stop" not in rest
    assert wait_for(lambda: control.streams_cut() == 1 or None)
    refused = httpx.post(
        gw.url + "/v1/messages",
        content=json.dumps({**STREAMED, "stream": False}),
        headers={"x-api-key": key, "content-type": "application/json"},
    )
    assert refused.status_code == 401
