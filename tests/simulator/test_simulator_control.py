"""The control API and the process wrapper: request log, secrecy, latency, clock, reset."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess

OAUTH = "sk-ant-oat01-control-0000-aaaa"
API_KEY = "sk-ant-api03-control-key-0000-kkkk"
CODEX = "codex-control-token-0000-cccc"
PostMessage = Callable[..., httpx.Response]


def test_the_request_log_records_the_credential_label_and_auth_kind(
    control: SimulatorControl, post_message: PostMessage, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 5})
    control.register(API_KEY, kind="api_key", label="platform-key")
    control.register(CODEX, kind="codex", label="codex-a")

    post_message(token=OAUTH, model="claude-opus-4-1")
    post_message(token=OAUTH, model="claude-opus-4-1", stream=True)
    post_message(api_key=API_KEY, stream=True)
    post_message(api_key="sk-ant-api03-adhoc-0000-zz09")
    api.get("/backend-api/wham/usage", headers={"authorization": f"Bearer {CODEX}"})
    post_message()

    log = [
        {
            k: v
            for k, v in r.items()
            if k in ("path", "method", "auth_kind", "credential", "model", "status", "stream")
        }
        for r in control.requests()
    ]
    messages = "/v1/messages"
    assert log == [
        {
            "path": messages,
            "method": "POST",
            "auth_kind": "oauth",
            "credential": "plan-a",
            "model": "claude-opus-4-1",
            "status": 200,
            "stream": False,
        },
        {
            "path": messages,
            "method": "POST",
            "auth_kind": "oauth",
            "credential": "plan-a",
            "model": "claude-opus-4-1",
            "status": 429,
            "stream": True,
        },
        {
            "path": messages,
            "method": "POST",
            "auth_kind": "api_key",
            "credential": "platform-key",
            "model": "claude-sonnet-4-5",
            "status": 200,
            "stream": True,
        },
        {
            "path": messages,
            "method": "POST",
            "auth_kind": "api_key",
            "credential": "…zz09",
            "model": "claude-sonnet-4-5",
            "status": 200,
            "stream": False,
        },
        {
            "path": "/backend-api/wham/usage",
            "method": "GET",
            "auth_kind": "codex",
            "credential": "codex-a",
            "model": None,
            "status": 200,
            "stream": False,
        },
        {
            "path": messages,
            "method": "POST",
            "auth_kind": "none",
            "credential": None,
            "model": None,
            "status": 401,
            "stream": False,
        },
    ]


def test_clearing_the_request_log_empties_it(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    post_message(token=OAUTH)
    assert len(control.requests()) == 1

    control.clear_requests()

    assert control.requests() == []


def test_the_control_api_never_returns_a_token(
    sim: SimulatorProcess, control: SimulatorControl, post_message: PostMessage
) -> None:
    tokens = [OAUTH, API_KEY, CODEX]
    answers = [
        control.register(OAUTH, kind="oauth"),
        control.register(API_KEY, kind="api_key", label="k"),
        control.register(CODEX, kind="codex"),
        control.set_usage(OAUTH, "five_hour", percent=10),
        control.revoke(CODEX),
        control.add_credit(API_KEY, 5),
        control.set_usage_scope(OAUTH, allowed=False),
    ]
    post_message(token=OAUTH)
    post_message(api_key=API_KEY)
    with httpx.Client(base_url=sim.base_url + "/_control", timeout=10) as raw:
        invalid = raw.post("/credentials", json={"token": OAUTH, "kind": "bogus"})
        unknown = raw.post("/credentials/revoke", json={"token": OAUTH + "x"})
        texts = [
            raw.get("/credentials").text,
            raw.get("/requests").text,
            invalid.text,
            unknown.text,
            *(str(a) for a in answers),
        ]

    assert invalid.status_code == 422
    assert unknown.status_code == 404
    assert control.credential("…aaaa")["fingerprint"] == "aaaa"
    for text in texts:
        for token in tokens:
            assert token not in text


def test_injected_latency_delays_usage_answers_without_blocking_others(
    control: SimulatorControl, api: httpx.Client, sim: SimulatorProcess
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_latency(300, scope="usage")
    headers = {"authorization": f"Bearer {OAUTH}"}

    started = time.monotonic()
    api.get("/api/oauth/usage", headers=headers)
    one_usage = time.monotonic() - started

    async def many() -> float:
        async with httpx.AsyncClient(base_url=sim.base_url, timeout=10) as client:
            began = time.monotonic()
            answers = await asyncio.gather(
                *(client.get("/api/oauth/usage", headers=headers) for _ in range(20))
            )
            assert all(a.status_code == 200 for a in answers)
            return time.monotonic() - began

    twenty_at_once = asyncio.run(many())
    started = time.monotonic()
    api.post(
        "/v1/messages",
        headers=headers,
        json={
            "model": "claude-haiku-4-5",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    message = time.monotonic() - started

    assert 0.3 <= one_usage < 3.0
    # Twenty sequential sleeps would take six seconds; concurrent ones overlap.
    assert 0.3 <= twenty_at_once < 3.0
    assert message < 0.3


def test_latency_for_all_applies_to_messages(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    assert control.set_latency(200) == {"all_ms": 200, "usage_ms": 0, "in_flight": 0}

    started = time.monotonic()
    post_message(token=OAUTH)

    assert 0.2 <= time.monotonic() - started < 3.0


def test_the_clock_runs_real_time_until_set_then_moves_only_when_told(
    control: SimulatorControl,
) -> None:
    before = datetime.now(tz=UTC)
    real = control.clock()
    assert real["frozen"] is False
    assert abs(datetime.fromisoformat(real["now"]) - before).total_seconds() < 5

    at = datetime(2031, 6, 1, tzinfo=UTC)
    assert control.set_clock(at)["unix"] == at.timestamp()
    assert control.now() == at
    assert control.advance_clock(90)["unix"] == at.timestamp() + 90
    assert control.clock()["frozen"] is True

    assert control.use_real_clock()["frozen"] is False


def test_reset_forgets_credentials_requests_models_latency_and_time(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.add_model("claude-extra-1")
    control.set_latency(5, scope="usage")
    control.set_clock(datetime(2031, 1, 1, tzinfo=UTC))
    post_message(token=OAUTH)

    control.reset()

    assert control.credentials() == []
    assert control.requests() == []
    assert "claude-extra-1" not in control.models()
    assert control.clock()["frozen"] is False
    assert control.set_latency(0, scope="usage") == {"all_ms": 0, "usage_ms": 0, "in_flight": 0}


def test_registering_an_unknown_window_is_refused(control: SimulatorControl) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        control.register(CODEX, kind="codex", capacity={"seven_day_opus": 10})

    assert refused.value.response.status_code == 400


def test_a_simulator_process_reports_its_port_and_stops_for_good() -> None:
    process = SimulatorProcess()

    with process as running:
        assert running.base_url.startswith("http://127.0.0.1:")
        assert running.control.health() is True
        pid = running.pid
        url = running.base_url
    assert pid is not None

    assert process.pid is None
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=2) as client:
        client.get(url + "/_control/health")


def test_a_latency_change_releases_the_answers_the_old_latency_held(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_latency(60_000)
    answered: list[httpx.Response] = []
    poster = threading.Thread(target=lambda: answered.append(post_message(token=OAUTH)))
    started = time.monotonic()
    poster.start()
    deadline = time.monotonic() + 10
    while control.latency()["in_flight"] != 1:
        assert time.monotonic() < deadline, "the message never reached the simulator"
        time.sleep(0.02)  # polling the real server's state

    control.set_latency(0)
    poster.join(timeout=10)

    assert answered and answered[0].status_code == 200
    assert time.monotonic() - started < 20  # not the 60 s it was held for
    assert control.latency()["in_flight"] == 0
    assert [r["status"] for r in control.requests()] == [200]
