"""Red team of the gateway: what a client can reach (every answer's status line,
headers and body, streamed or not, served, walked or refused, and the gateway's log)
holds no credential of the pool, no other person's key, and a person's key reaches
no one else's session."""

from __future__ import annotations

import json
import secrets

import httpx
import pytest
from django.contrib.auth.models import User

from gateway.models import GatewaySession
from simulator.control import SimulatorControl
from tests.execution.support import register_plan
from tests.gateway.e2e.support import Gateway, issue, wait_for
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SESSION = "user_x_account__session_aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"


def body(stream: bool = False, session: str = SESSION) -> bytes:
    return json.dumps(
        {
            "model": "claude-sonnet-5-5",
            "max_tokens": 32,
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": session},
        }
    ).encode()


def everything(answer: httpx.Response) -> bytes:
    """All a client can read of an answer."""
    head = "".join(f"{k}: {v}\n" for k, v in answer.headers.multi_items()).encode()
    return head + answer.content


def test_no_credential_reaches_a_client_whatever_happens(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    _, a_token = register_plan(control, "max-a")
    _, b_token = register_plan(control, "max-b")
    platform_key = f"sk-ant-api03-{secrets.token_hex(24)}"
    control.register(platform_key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=platform_key)
    mine, theirs = issue(person, "mine"), issue(User.objects.create_user("other"), "theirs")
    secrets_of_others = [a_token, b_token, platform_key, theirs]

    seen: list[httpx.Response] = []
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        headers = {"x-api-key": mine, "content-type": "application/json"}
        seen.append(client.post("/v1/messages", content=body(), headers=headers))
        seen.append(client.post("/v1/messages", content=body(stream=True), headers=headers))
        for token in (a_token, b_token):  # every plan refuses: the key serves, then 429s
            control.set_usage(token, "five_hour", percent=100)
        seen.append(client.post("/v1/messages", content=body(), headers=headers))
        control.add_credit(platform_key, -50)
        seen.append(client.post("/v1/messages", content=body(), headers=headers))
        seen.append(client.post("/v1/messages", content=b"{", headers=headers))
        seen.append(client.post("/v1/messages", content=body(), headers={"x-api-key": "nope"}))
        seen.append(client.get("/v1/models", headers=headers))
        seen.append(client.get("/internal/streams", headers=headers))
        seen.append(client.get("/metrics", headers={"authorization": f"Bearer {mine}"}))

    assert [a.status_code for a in seen] == [200, 200, 200, 429, 400, 401, 200, 401, 401]
    for answer in seen:
        for secret in secrets_of_others:
            assert secret.encode() not in everything(answer), answer.request.url
            assert secret[-12:].encode() not in everything(answer)
    log = gw.log()
    for secret in [*secrets_of_others, mine]:
        assert secret not in log and secret[-12:] not in log


def test_a_session_id_another_person_sends_is_their_own_session(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    register_plan(control, "max-b")
    mine = issue(person, "mine")
    theirs = issue(User.objects.create_user("other"), "theirs")
    headers = {"content-type": "application/json"}
    httpx.post(gw.url + "/v1/messages", content=body(), headers={**headers, "x-api-key": mine})
    session = GatewaySession.objects.get(key__owner=person)

    # The other person sends my session id: it names a session of their own key.
    answer = httpx.post(
        gw.url + "/v1/messages", content=body(), headers={**headers, "x-api-key": theirs}
    )

    assert answer.status_code == 200
    theirs_session = wait_for(lambda: GatewaySession.objects.exclude(pk=session.pk).first())
    assert theirs_session.key.owner.username == "other"
    assert theirs_session.session_id == session.session_id
    before = (session.subscription_id, session.switches, session.updated_at)
    session.refresh_from_db()
    assert (session.subscription_id, session.switches, session.updated_at) == before
