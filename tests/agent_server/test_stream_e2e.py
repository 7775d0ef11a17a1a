"""End to end: streamed turns and cancels with the real Claude Code CLI, a real agent
server process and the simulator (its slow-stream pause and its scripted tool use).

What a test asserts about processes it reads from /proc: the CLI and what its Bash
tool started are gone, not merely unreported.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.agent_server.conftest import StartServer
from tests.agent_server.support import AgentServer, turn
from tests.procs import alive, cmdline, descendants_of

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

pytestmark = pytest.mark.e2e

# The Bash call the scripted model makes (the CLI refuses a bare `sleep 60`).
SLEEP = "echo waiting; sleep 60; echo done"


def oat(tag: str) -> str:
    return f"sk-ant-oat01-{tag}-{secrets.token_hex(8)}"


def stream_lines(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line:
            yield json.loads(line)


def sleepers(server: AgentServer) -> list[int]:
    """The `sleep 60` processes below the server (what the scripted Bash call ran)."""
    return [
        proc.pid
        for proc in descendants_of(server.pid)
        if proc.state != "Z" and cmdline(proc.pid).split(b"\0")[:2] == [b"sleep", b"60"]
    ]


def await_sleeper(server: AgentServer, sim: SimulatorProcess, within: float = 30.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if found := sleepers(server):
            return found[0]
        time.sleep(0.02)  # polling for the tool's process to appear, not for time
    raise AssertionError(f"the Bash tool's sleep never started: {sim.control.red_team()}")


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids):
            return True
        time.sleep(0.02)  # polling for the kernel to deliver the kill, not for time
    return False


def test_a_streamed_turns_text_arrives_before_its_result_and_before_the_cli_exits(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("stream")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.set_stream_pause(400)  # a slow model: each stream event 0.4 s apart
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)
    assert server.client is not None
    message = "say hi to everyone in the room, slowly"
    body = turn(message=message, stream=True)

    texts: list[str] = []
    with server.client.stream("POST", "/api/task", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = stream_lines(response)
        first = next(lines)
        # the first piece of text, while the CLI is still mid-answer
        assert first["type"] == "event" and first["event"]["kind"] == "text", first
        assert server.children(), "the CLI had already exited"
        texts.append(first["event"]["text"])
        rest = list(lines)

    result = rest[-1]
    texts += [line["event"]["text"] for line in rest[:-1] if line["event"]["kind"] == "text"]
    assert result["type"] == "result" and result["status"] == 200, result
    assert result["body"]["execution_id"] == body["execution_id"]
    assert result["body"]["response"] == f"Simulated reply: {message}"
    assert "".join(texts) == result["body"]["response"]
    assert len(texts) > 1  # streamed in pieces, not once at the end


def _sleeping_turn(
    sim: SimulatorProcess, start_server: StartServer, label: str
) -> tuple[Any, dict[str, Any]]:
    """A server whose next streamed turn runs a long Bash call, and that turn's body."""
    token = oat(label)
    sim.control.register(token, kind="oauth", label="sub-a")
    trigger = f"{label}-{uuid.uuid4().hex[:8]}"
    sim.control.arm_red_team(trigger=trigger, reads=[], commands=[SLEEP])
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token, TRINITY_AGENT_ALLOWED_TOOLS="Bash")
    assert server.client is not None
    return server, turn(message=f"{trigger}: wait", stream=True, timeout_seconds=120)


def test_a_cancelled_turn_ends_its_cli_and_what_bash_started_and_answers_409(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    server, body = _sleeping_turn(sim, start_server, "cancel")

    with server.client.stream("POST", "/api/task", json=body) as response:
        lines = stream_lines(response)
        events = []
        for line in lines:
            events.append(line)
            if line["type"] == "event" and line["event"]["kind"] == "tool_call":
                break
        assert events[-1]["event"]["name"] == "Bash" and events[-1]["event"]["input"] == SLEEP
        sleep_pid = await_sleeper(server, sim)
        spawned = server.children()
        started = time.monotonic()
        # a second connection of the same client, the stream still open on the first
        cancel = server.client.post(f"/api/turns/{body['execution_id']}/cancel")
        assert cancel.status_code == 200, cancel.text
        assert cancel.json() == {"execution_id": body["execution_id"], "cancelled": True}
        assert gone_within([sleep_pid, *spawned], 2.0 - (time.monotonic() - started))
        result = list(lines)[-1]

    assert result["type"] == "result" and result["status"] == 409, result
    assert result["body"]["error_code"] == "cancelled"
    assert result["body"]["execution_id"] == body["execution_id"]
    assert server.children() == []

    # the same id again answers at once, spawning nothing
    requests_before = len(sim.control.requests())
    again = server.post("/api/task", {**body, "stream": False})
    assert again.status_code == 409 and again.json()["error_code"] == "cancelled"
    assert len(sim.control.requests()) == requests_before


def test_a_client_leaving_the_stream_ends_the_turn(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    server, body = _sleeping_turn(sim, start_server, "leave")

    with server.client.stream("POST", "/api/task", json=body) as response:
        # held: a dropped line iterator would close the response early
        lines = stream_lines(response)
        for line in lines:
            if line["type"] == "event" and line["event"]["kind"] == "tool_call":
                break
        sleep_pid = await_sleeper(server, sim)
        spawned = server.children()
    # the response is closed: the connection is gone mid-stream

    assert gone_within([sleep_pid, *spawned], 10.0)
    assert "the client left the stream" in server.log_text()
    # a disconnect is no cancel: the id may run again
    assert not server.log_text().count("already cancelled")
