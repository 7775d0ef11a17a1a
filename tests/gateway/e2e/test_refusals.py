"""What bad input and a key's limits get from the real gateway: each a provider-shaped
error with the right status (a 429 with ``Retry-After``), and nothing sent upstream."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

import httpx
import pytest
from django.contrib.auth.models import User

from gateway.keys import gateway_key_revoke, gateway_key_update
from gateway.models import GatewayKey
from simulator.control import SimulatorControl
from tests.execution.support import register_plan
from tests.gateway.e2e.support import MAX_BODY, METRICS_TOKEN, Gateway, issue, wait_for
from trinity import clock

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BODY = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}


def post(
    gw: Gateway, key: str, body: object = BODY, path: str = "/v1/messages", **kw: object
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"x-api-key": key, "content-type": "application/json", **kw.pop("headers", {})}  # type: ignore[dict-item]
    return httpx.post(gw.url + path, content=content, headers=headers, timeout=30)


def anthropic_error(response: httpx.Response) -> str:
    body = response.json()
    assert body["type"] == "error", body
    return str(body["error"]["type"])


def upstream_count(control: SimulatorControl) -> int:
    return len([r for r in control.requests() if r["path"].startswith("/v1/")])


@pytest.mark.parametrize(
    ("body", "path", "status", "kind"),
    [
        (b"{not json", "/v1/messages", 400, "invalid_request_error"),
        ([1, 2], "/v1/messages", 400, "invalid_request_error"),
        ({"max_tokens": 5, "messages": []}, "/v1/messages", 400, "invalid_request_error"),
        ({**BODY, "model": "gpt-4o"}, "/v1/messages", 404, "not_found_error"),
        ({**BODY, "model": "claude-unknown-9"}, "/v1/messages", 404, "not_found_error"),
        (BODY, "/v1/complete", 404, "not_found_error"),
        (b"x" * (MAX_BODY + 1), "/v1/messages", 413, "request_too_large"),
    ],
)
def test_bad_input_gets_a_provider_shaped_error_and_nothing_goes_upstream(
    gw: Gateway,
    control: SimulatorControl,
    person: User,
    body: object,
    path: str,
    status: int,
    kind: str,
) -> None:
    register_plan(control, "max-a")
    answer = post(gw, issue(person), body, path)
    assert answer.status_code == status, answer.text
    assert anthropic_error(answer) == kind
    assert upstream_count(control) == 0


def test_an_openai_client_gets_openai_shaped_errors(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    answer = post(gw, issue(person), {"model": "gpt-9-unknown", "input": "hi"}, "/v1/responses")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "model_not_found"


def test_a_missing_unknown_revoked_or_expired_key_is_refused_401(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    revoked = issue(person, "old")
    gateway_key_revoke(key=GatewayKey.objects.get(name="old"), now=clock.now())
    ends = clock.now() + timedelta(seconds=1)
    expired = issue(person, "brief", expires_at=ends)
    wait_for(lambda: clock.now() > ends or None)

    for key in ("", "trinity-gw-nope", revoked, expired):
        answer = post(gw, key)
        assert answer.status_code == 401, (key[:12], answer.text)
        assert anthropic_error(answer) == "authentication_error"
    assert upstream_count(control) == 0


def test_a_key_is_held_to_its_providers_and_model_families(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    codex_only = issue(person, "codex", providers=["openai-codex"])
    haiku_only = issue(person, "haiku", model_families=["haiku"])

    assert post(gw, codex_only).status_code == 403
    assert post(gw, haiku_only).status_code == 403
    assert post(gw, haiku_only, {**BODY, "model": "claude-haiku-4-5"}).status_code == 200
    models = httpx.get(
        gw.url + "/v1/models", headers={"x-api-key": haiku_only, "anthropic-version": "2023-06-01"}
    ).json()
    assert [m["id"] for m in models["data"]] == ["claude-haiku-4-5"]


def test_requests_per_minute_refuse_with_retry_after_within_the_minute(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    key = issue(person, requests_per_minute=2)
    answers = [post(gw, key) for _ in range(3)]
    statuses = [a.status_code for a in answers]
    # Two per clock minute: a minute that turned between them admits one more.
    assert statuses.count(429) <= 1 and statuses[:2] == [200, 200] or statuses == [200, 200, 429]
    refused = [a for a in answers if a.status_code == 429]
    if refused:
        assert 1 <= int(refused[0].headers["retry-after"]) <= 60
        assert anthropic_error(refused[0]) == "rate_limit_error"
        assert "requests-per-minute" in refused[0].json()["error"]["message"]


def test_concurrent_streams_over_the_limit_are_refused(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    key = issue(person, max_streams=1)
    control.set_latency(3000)
    with ThreadPoolExecutor(1) as background:
        first = background.submit(post, gw, key, {**BODY, "stream": True})
        wait_for(lambda: open_streams(gw) or None)  # the first one is being served
        second = post(gw, key)
        assert second.status_code == 429, second.text
        assert second.headers["retry-after"] == "1"
        assert "concurrent stream" in second.json()["error"]["message"]
        control.set_latency(0)
        assert first.result().status_code == 200
    assert wait_for(lambda: post(gw, key).status_code == 200 or None)


def open_streams(gw: Gateway) -> list[dict[str, object]]:
    answer = httpx.get(
        gw.url + "/internal/streams", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    assert answer.status_code == 200
    return list(answer.json())


def _refused_or_none(answer: httpx.Response) -> httpx.Response | None:
    return answer if answer.status_code == 429 else None


def test_daily_token_and_dollar_caps_refuse_until_the_day_ends(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    tokens_key = issue(person, "tokens", daily_tokens=1)
    dollars_key = issue(person, "dollars", daily_usd=Decimal("0.0001"))

    for key, words in ((tokens_key, "daily token cap"), (dollars_key, "daily dollar cap")):
        assert post(gw, key).status_code == 200
        refused = wait_for(lambda key=key: _refused_or_none(post(gw, key)))  # type: ignore[misc]
        assert words in refused.json()["error"]["message"]
        assert refused.headers["x-should-retry"] == "false"
        now = clock.now()
        midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        assert abs(int(refused.headers["retry-after"]) - (midnight - now).total_seconds()) < 5


def test_a_raised_limit_applies_within_a_poll(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    key = issue(person, daily_tokens=1)
    post(gw, key)
    wait_for(lambda: _refused_or_none(post(gw, key)))
    gateway_key_update(
        key=GatewayKey.objects.get(owner=person), now=clock.now(), daily_tokens=10**9
    )
    assert wait_for(lambda: post(gw, key).status_code == 200 or None)


def test_the_gateways_metrics_need_the_platforms_token(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    assert post(gw, issue(person)).status_code == 200
    assert httpx.get(gw.url + "/metrics").status_code == 401
    scraped = httpx.get(gw.url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200 and "trinity_gateway_requests" in scraped.text
    # What the gateway spent before a request left for the provider, per request.
    counted = [
        float(line.split()[-1])
        for line in scraped.text.splitlines()
        if line.startswith("trinity_gateway_overhead_seconds_count")
    ]
    assert counted and counted[0] >= 1


def test_a_deactivated_owners_key_is_refused_within_a_poll(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    key = issue(person)
    assert post(gw, key).status_code == 200

    # Deactivated as the admin does it: the key's own row does not change.
    person.is_active = False
    person.save(update_fields=["is_active"])
    deactivated = time.monotonic()
    answer = wait_for(lambda: (a := post(gw, key)).status_code == 401 and a or None)

    # Within a poll (TRINITY_GATEWAY_POLL_SECONDS=1 here), with a second's slack.
    assert time.monotonic() - deactivated < 2.5
    assert anthropic_error(answer) == "authentication_error"
    assert "owner is deactivated" in answer.json()["error"]["message"]
    served = upstream_count(control)
    assert post(gw, key).status_code == 401
    assert upstream_count(control) == served
