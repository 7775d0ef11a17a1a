"""The official ``openai`` SDK's Responses API through the real gateway: served on a
ChatGPT/Codex plan (streamed, and collected for a client that asked for one JSON
answer), and walked to the OpenAI platform key when every plan refuses."""

from __future__ import annotations

import secrets

import openai
import pytest
from django.contrib.auth.models import User

from gateway.models import GatewayUsage
from simulator.control import SimulatorControl
from tests.execution.support import register_codex_plan
from tests.gateway.e2e.support import Gateway, issue, wait_for
from tests.session_canary import MARKER
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MODEL = "gpt-5.5-codex"
PLAN_PATH = "/backend-api/codex/responses"


def client(gw: Gateway, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=gw.url + "/v1", max_retries=0, timeout=30)


def sent(control: SimulatorControl) -> list[tuple[str, str | None, int]]:
    return [(r["path"], r["credential"], r["status"]) for r in control.requests()]


def test_a_codex_plan_serves_a_json_answer_and_a_stream(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    _, token = register_codex_plan(control, "gpt-a")
    sdk = client(gw, issue(person))

    answer = sdk.responses.create(model=MODEL, input="say hi")
    with sdk.responses.stream(model=MODEL, input="stream hi") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()

    assert answer.output_text.startswith("Simulated reply")
    assert (text or final.output_text).startswith("Simulated reply")
    assert sent(control) == [(PLAN_PATH, "gpt-a", 200), (PLAN_PATH, "gpt-a", 200)]
    assert token.encode() in bytes(gw.tap.upstream)
    rows = wait_for(lambda: list(GatewayUsage.objects.filter(key__owner=person)) or None)
    wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).count() == 2 or None)
    rows = list(GatewayUsage.objects.filter(key__owner=person).order_by("at"))
    assert [(r.served_by_name, r.streamed) for r in rows] == [("gpt-a", False), ("gpt-a", True)]
    assert all(r.input_tokens > 0 and r.output_tokens > 0 and r.billed_usd == 0 for r in rows)


def test_when_every_codex_plan_refuses_the_openai_key_serves_inside_the_request(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    _, a_token = register_codex_plan(control, "gpt-a")
    _, b_token = register_codex_plan(control, "gpt-b")
    for token in (a_token, b_token):
        control.set_usage(token, "five_hour", percent=100)
    key = f"sk-proj-{MARKER}{secrets.token_hex(12)}"
    control.register(key, kind="openai_key", label="openai-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key, provider="openai-codex")

    answer = client(gw, issue(person)).responses.create(model=MODEL, input="hi")

    assert answer.output_text.startswith("Simulated reply")
    log = sent(control)
    assert log[-1] == ("/v1/responses", "openai-key", 200)
    assert {(p, s) for p, _, s in log[:-1]} <= {(PLAN_PATH, 429)}
    assert not [entry for entry in log if entry[0].startswith("/v1/messages")]
    row = wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).first())
    assert row.served_by_kind == "api_key" and row.billed_usd > 0
