"""A throttle through the real agent server and the real Claude Code CLI: an upstream
that answers 429 with no quota evidence (no unified headers, only ``x-should-retry``)
reaches the control plane within seconds as a ``rate_limit`` with no reset and no
window, which the control plane classifies as a throttle (a short backoff), not an
exhausted plan. Before the spawn default, the CLI retried it for minutes and the
turn ended as a ``timeout``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agents.client import parse_turn_response
from routing.attempt_refusal import QuotaEvidence, classify_attempt_refusal
from tests.agent_server.conftest import StartServer

pytestmark = pytest.mark.e2e

TOKEN = "sk-ant-oat01-" + "t" * 40


class _Throttling(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).requests.append(self.path)
        body = json.dumps(
            {
                "type": "error",
                "error": {"type": "rate_limit_error", "message": "Too many requests"},
            }
        ).encode()
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("x-should-retry", "true")
        self.send_header("retry-after", "1")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def throttling_upstream() -> Iterator[str]:
    _Throttling.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_throttle_reaches_the_control_plane_in_seconds_as_a_rate_limit_without_evidence(
    start_server: StartServer, throttling_upstream: str
) -> None:
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=TOKEN, ANTHROPIC_BASE_URL=throttling_upstream)
    started = time.monotonic()

    response = server.post(
        "/api/task", {"execution_id": "exec-throttle", "message": "hi", "timeout_seconds": 120}
    )

    elapsed = time.monotonic() - started
    assert response.status_code == 429, response.text
    body = response.json()
    assert (body["error_code"], body["resets_at"], body["limiting_window"]) == (
        "rate_limit",
        None,
        None,
    )
    assert "not your usage limit" in body["detail"]
    # The first request and the spawn default's two retries, then the CLI reported it.
    messages = [p for p in _Throttling.requests if p.startswith("/v1/messages")]
    assert len(messages) == 3, _Throttling.requests
    assert elapsed < 60, elapsed

    # The control plane's side of the contract: a throttle, not an exhausted plan.
    outcome = parse_turn_response(httpx.Response(429, json=body))
    refusal = classify_attempt_refusal(
        error_code=outcome.error_code,
        detail=outcome.detail,
        evidence=QuotaEvidence(outcome.resets_at, outcome.limiting_window),
    )
    assert (refusal.failure_kind, refusal.reason, refusal.throttle) == (
        "rate_limit",
        "throttled",
        True,
    )
