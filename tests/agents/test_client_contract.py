"""The Django-side client pins the same JSON contract the agent server pins.

Requests the client sends are captured by a real HTTP server on loopback and
validated with the agent server's own pydantic models; the canonical example
answers are parsed by the client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agent_server import contract
from agents.client import (
    AgentServerClient,
    AgentServerUnavailable,
    ReloadRefused,
    parse_turn_response,
)
from routing.rung import Rung, RungKind
from trinity.crypto import Secret
from trinity_contract.errors import ERROR_STATUS
from trinity_contract.proof import health_proof


class _Capture(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    answer: tuple[int, dict[str, Any], dict[str, str]] = (200, {}, {})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        # /health?nonce=...: the proof the client checks before it sends anything.
        nonce = parse_qs(urlsplit(self.path).query).get("nonce", [""])[0]
        _Capture.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
        body = {
            **contract.EXAMPLE_HEALTH_RESPONSE,
            "proof": health_proof(secret=SECRET.reveal(), nonce=nonce),
        }
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers["Content-Length"])
        _Capture.seen.append(
            {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "body": json.loads(self.rfile.read(length)),
            }
        )
        status, body, headers = _Capture.answer
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def capture_server() -> Iterator[str]:
    _Capture.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


SECRET = Secret("agent-shared-secret-0123456789")


@pytest.mark.parametrize(
    ("override", "session_id", "model_cls", "path"),
    [
        (None, None, contract.TaskRequest, "/api/task"),
        (
            Rung(RungKind.SUBSCRIPTION, Secret("sk-ant-oat01-" + "o" * 30), 1, "plan-a"),
            None,
            contract.TaskRequest,
            "/api/task",
        ),
        (
            Rung(RungKind.API_KEY, Secret("sk-ant-api03-" + "k" * 30)),
            None,
            contract.TaskRequest,
            "/api/task",
        ),
        (None, "chat-1", contract.ChatRequest, "/api/chat"),
    ],
)
def test_turn_requests_match_the_agent_server_contract(
    capture_server: str,
    override: Rung | None,
    session_id: str | None,
    model_cls: type[contract.TaskRequest],
    path: str,
) -> None:
    _Capture.answer = (200, contract.EXAMPLE_TASK_RESPONSE, {})
    client = AgentServerClient(endpoint=capture_server, secret=SECRET, handle="1")
    outcome = client.run_turn(
        execution_id="e-1",
        message="hello",
        timeout_seconds=30,
        model="claude-sonnet-4-5",
        rung=override,
        session_id=session_id,
    )
    seen = _Capture.seen[-1]
    assert seen["path"] == path
    assert seen["auth"] == f"Bearer {SECRET.reveal()}"
    parsed = model_cls.model_validate(seen["body"])
    applied = parsed.auth_override.applied() if parsed.auth_override else None
    if override is None:
        assert applied is None
    else:
        assert applied is not None and applied.kind == override.wire_kind
        assert applied.secret == override.secret.reveal()
    assert outcome.ok and outcome.response == contract.EXAMPLE_TASK_RESPONSE["response"]
    assert outcome.input_tokens == 1200 and outcome.output_tokens == 340


@pytest.mark.parametrize("code", sorted(contract.EXAMPLE_ERRORS))
def test_every_example_error_parses_to_its_code(code: str) -> None:
    body = contract.EXAMPLE_ERRORS[code]
    response = httpx.Response(
        ERROR_STATUS[code],
        json=body,
        headers={contract.AUTH_OVERRIDE_HEADER: "oauth_token"},
    )
    outcome = parse_turn_response(response)
    assert not outcome.ok
    assert outcome.error_code == code
    assert outcome.override_echo == "oauth_token"
    assert (outcome.resets_at is not None) == (body.get("resets_at") is not None)
    if outcome.resets_at is not None:
        assert outcome.resets_at.tzinfo is not None


def test_a_rate_limit_carries_the_limiting_window_the_agent_server_saw() -> None:
    body = contract.EXAMPLE_RATE_LIMIT_WITH_CLAIM
    outcome = parse_turn_response(httpx.Response(429, json=body))
    assert (outcome.error_code, outcome.limiting_window) == ("rate_limit", "seven_day_sonnet")
    assert outcome.resets_at is not None and outcome.resets_at.isoformat() == (
        "2026-05-04T09:00:00+00:00"
    )
    # An agent server that predates the field (or a CLI refusal) names no window.
    plain = parse_turn_response(httpx.Response(429, json=contract.EXAMPLE_ERRORS["rate_limit"]))
    assert plain.limiting_window == ""


def test_an_answer_without_json_is_a_container_fault() -> None:
    outcome = parse_turn_response(httpx.Response(502, text="Bad gateway"))
    assert (outcome.ok, outcome.error_code) == (False, "container_fault")


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, {**contract.EXAMPLE_TASK_RESPONSE, "usage": {"input_tokens": "many"}}),
        (200, {**contract.EXAMPLE_TASK_RESPONSE, "usage": {"output_tokens": -1}}),
        (200, {**contract.EXAMPLE_TASK_RESPONSE, "usage": [1, 2]}),
        (200, {**contract.EXAMPLE_TASK_RESPONSE, "cost_usd": "free"}),
        (429, {**contract.EXAMPLE_ERRORS["rate_limit"], "resets_at": "soon"}),
        (429, {**contract.EXAMPLE_ERRORS["rate_limit"], "resets_at": "2026-05-01T04:10:00"}),
        (429, {**contract.EXAMPLE_RATE_LIMIT_WITH_CLAIM, "limiting_window": 7}),
        (429, {**contract.EXAMPLE_RATE_LIMIT_WITH_CLAIM, "limiting_window": "w" * 41}),
    ],
)
def test_an_off_contract_answer_is_a_container_fault_not_an_exception(
    status: int, body: dict[str, Any]
) -> None:
    outcome = parse_turn_response(httpx.Response(status, json=body))
    assert (outcome.ok, outcome.error_code) == (False, "container_fault")
    assert "off contract" in outcome.detail


def test_reload_token_request_matches_the_contract(capture_server: str) -> None:
    _Capture.answer = (200, contract.EXAMPLE_RELOAD_TOKEN_RESPONSE, {})
    client = AgentServerClient(endpoint=capture_server, secret=SECRET, handle="1")
    token = Secret("sk-ant-oat01-" + "n" * 30)
    assert client.reload_token(token=token, remove_api_key=True) == ["ANTHROPIC_API_KEY"]
    body = contract.ReloadTokenRequest.model_validate(_Capture.seen[-1]["body"])
    assert body.token.get_secret_value() == token.reveal() and body.remove_api_key is True
    _Capture.answer = (404, {"detail": "Not Found"}, {})
    with pytest.raises(ReloadRefused) as refused:
        client.reload_token(token=token, remove_api_key=True)
    assert refused.value.status_code == 404


def test_an_unreachable_server_raises_without_the_secret() -> None:
    client = AgentServerClient(endpoint="http://127.0.0.1:9", secret=SECRET, handle="1")
    with pytest.raises(AgentServerUnavailable) as err:
        client.run_turn(execution_id="e", message="m", timeout_seconds=1)
    assert SECRET.reveal() not in str(err.value)


def test_the_client_drops_an_idle_connection_before_the_agent_server_does() -> None:
    # Equal limits (httpx's and uvicorn's 5 s defaults) let a turn go out on a
    # connection the server was closing: it failed without reaching the server
    # (found by bench/storm.py under load).
    from agent_server.__main__ import SERVER_KEEPALIVE_SECONDS
    from agents.client import KEEPALIVE_SECONDS, POOL_LIMITS

    assert POOL_LIMITS.keepalive_expiry == KEEPALIVE_SECONDS
    assert KEEPALIVE_SECONDS * 2 <= SERVER_KEEPALIVE_SECONDS


def test_a_served_turn_carries_the_forwarded_ratelimit_headers() -> None:
    body = contract.EXAMPLE_TASK_RESPONSE_WITH_RATELIMIT
    outcome = parse_turn_response(httpx.Response(200, json=body))
    assert outcome.ok
    assert outcome.upstream_ratelimit == body["upstream_ratelimit"]
    assert (
        parse_turn_response(
            httpx.Response(200, json=contract.EXAMPLE_TASK_RESPONSE)
        ).upstream_ratelimit
        == {}
    )


@pytest.mark.parametrize(
    "malformed",
    [
        "anthropic-ratelimit-unified-status: allowed",
        {"x-other-header": "1"},
        {"anthropic-ratelimit-unified-5h-utilization": 0.5},
        {f"anthropic-ratelimit-unified-{i}-status": "allowed" for i in range(65)},
    ],
)
def test_a_malformed_ratelimit_field_is_dropped_and_the_served_turn_stays_served(
    malformed: object,
) -> None:
    body = {**contract.EXAMPLE_TASK_RESPONSE, "upstream_ratelimit": malformed}
    outcome = parse_turn_response(httpx.Response(200, json=body))
    assert outcome.ok
    assert outcome.upstream_ratelimit == {}
