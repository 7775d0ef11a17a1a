"""Streamed answers and cancels of the HTTP surface, in process.

The hostile-output test runs the real Claude Code runtime on a stand-in CLI (a small
script): what it pins is what the server does with output the real CLI cannot be
made to print (garbage, a 5 MiB line, 100k events, credentials). The real CLI's
stream and cancel are pinned by test_stream_e2e.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agent_server.app import create_app
from agent_server.runtimes.claude_code import ClaudeCodeRuntime
from agent_server.runtimes.events import MAX_EVENT_BYTES, MAX_EVENTS
from tests.agent_server.test_app import (
    AUTH,
    BASE_OAT,
    SECRET,
    RecordingRuntime,
    make_config,
    task,
)

# Prints garbage, a 5 MiB line, 100k text deltas with credentials in them, a tool
# call quoting the server's own secret, and last a result.
HOSTILE_CLI = """#!{python}
import json, sys
out = sys.stdout
out.write("garbage \\x00\\xff not json\\n[1,2]\\n{{\\n")
out.write("x" * (5 * 1024 * 1024) + "\\n")
out.write(json.dumps({{"type": "assistant", "message": {{"id": "m0", "content": [
    {{"type": "tool_use", "id": "t1", "name": "Bash",
      "input": {{"command": "echo {secret} {oat}"}}}}]}}}}) + "\\n")
delta = {{"type": "stream_event", "api_message_id": "m1", "event": {{
    "type": "content_block_delta", "delta": {{"type": "text_delta", "text": ""}}}}}}
for i in range(100_000):
    delta["event"]["delta"]["text"] = "word sk-ant-oat01-leaked-abcdefgh " if i % 7 else "{oat} "
    out.write(json.dumps(delta) + "\\n")
out.write(json.dumps({{"type": "result", "is_error": False, "result": "done {oat}",
    "usage": {{"input_tokens": 1, "output_tokens": 2}}}}) + "\\n")
"""


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[TestClient]:
    script = tmp_path / "hostile-claude"
    script.write_text(HOSTILE_CLI.format(python=sys.executable, secret=SECRET, oat=BASE_OAT))
    script.chmod(0o755)
    runtime = ClaudeCodeRuntime(binary=str(script), clock=lambda: datetime.now(UTC))
    app = create_app(
        make_config(tmp_path),
        runtime=runtime,
        baseline={"CLAUDE_CODE_OAUTH_TOKEN": BASE_OAT, "PATH": "/usr/bin:/bin"},
    )
    with TestClient(app) as client:
        yield client


def test_hostile_output_is_bounded_redacted_and_the_result_still_comes(
    hostile: TestClient,
) -> None:
    response = hostile.post("/api/task", json=task(stream=True), headers=AUTH)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = ndjson(response.text)
    events = [line["event"] for line in lines[:-1]]
    assert all(line["type"] == "event" for line in lines[:-1])
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == 200, lines[-1]
    assert lines[-1]["body"]["response"].startswith("done [redacted")
    assert events[0]["kind"] == "tool_call" and events[0]["name"] == "Bash"
    assert events[-1] == {"kind": "truncated", "dropped": 1}
    assert len(events) <= MAX_EVENTS + 1
    assert sum(len(json.dumps(e)) for e in events) < 2 * MAX_EVENT_BYTES
    for needle in (SECRET, BASE_OAT, "sk-ant-oat01-leaked"):
        assert needle not in response.text


def test_the_streamed_result_is_exactly_the_plain_answer(hostile: TestClient) -> None:
    plain = hostile.post("/api/task", json=task(), headers=AUTH)
    streamed = hostile.post("/api/task", json=task(stream=True), headers=AUTH)
    result = ndjson(streamed.text)[-1]
    assert (result["status"], result["body"]) == (plain.status_code, plain.json())


@pytest.fixture
def recording(tmp_path: Path) -> Iterator[tuple[TestClient, RecordingRuntime]]:
    runtime = RecordingRuntime()
    app = create_app(
        make_config(tmp_path),
        runtime=runtime,
        baseline={"CLAUDE_CODE_OAUTH_TOKEN": BASE_OAT, "PATH": "/usr/bin"},
    )
    runtime.forwarder = app.state.forwarder
    with TestClient(app) as client:
        yield client, runtime


def test_a_turn_cancelled_before_it_came_answers_409_and_spawns_nothing(
    recording: tuple[TestClient, RecordingRuntime],
) -> None:
    client, runtime = recording
    cancel = client.post("/api/turns/exec-9/cancel", headers=AUTH)
    assert cancel.status_code == 200
    assert cancel.json() == {"execution_id": "exec-9", "cancelled": False}

    plain = client.post("/api/task", json=task(execution_id="exec-9"), headers=AUTH)
    streamed = client.post(
        "/api/chat", json=task(execution_id="exec-9", session_id="s", stream=True), headers=AUTH
    )

    assert plain.status_code == 409 and plain.json()["error_code"] == "cancelled"
    assert ndjson(streamed.text) == [{"type": "result", "status": 409, "body": plain.json()}]
    assert runtime.calls == []
    assert (
        client.post("/api/task", json=task(execution_id="exec-10"), headers=AUTH).status_code == 200
    )


def test_cancel_needs_the_secret(recording: tuple[TestClient, RecordingRuntime]) -> None:
    client, _ = recording
    assert client.post("/api/turns/exec-1/cancel").status_code == 401
    assert (
        client.post("/api/task", json=task(execution_id="exec-1"), headers=AUTH).status_code == 200
    )


def test_a_refused_request_is_plain_json_even_when_it_asked_to_stream(
    recording: tuple[TestClient, RecordingRuntime],
) -> None:
    client, _ = recording
    unauthorized = client.post("/api/task", json=task(stream=True))
    invalid = client.post("/api/task", json={"stream": True}, headers=AUTH)
    assert unauthorized.status_code == 401 and unauthorized.json()["error_code"] == "unauthorized"
    assert invalid.status_code == 400 and invalid.json()["error_code"] == "invalid_request"
