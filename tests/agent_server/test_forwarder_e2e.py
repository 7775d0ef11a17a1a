"""End to end: the real Claude Code CLI reaches the simulator only through the forwarder.

What the CLI process held is read from `/proc/<cli pid>/` while the turn runs (its
environ, argv, cwd and HOME): the tests run as root in CI, and a process's own user
may read it anyway. What went upstream is what the simulator saw.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agent_server.contract import TaskResponse
from tests.agent_server.conftest import StartServer
from tests.agent_server.support import AgentServer, files_holding, turn

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

pytestmark = pytest.mark.e2e

CAPABILITY_PREFIX = "trinity-cap-"


def oat(tag: str) -> str:
    return f"sk-ant-oat01-{tag}-{secrets.token_hex(8)}"


def api_key(tag: str) -> str:
    return f"sk-ant-api03-{tag}-{secrets.token_hex(8)}"


def seen(sim: SimulatorProcess) -> list[tuple[str, str | None]]:
    return [
        (record["auth_kind"], record["credential"])
        for record in sim.control.requests()
        if record["path"].startswith("/v1/messages")
    ]


def in_background(server: AgentServer, body: dict[str, Any]) -> tuple[threading.Thread, dict]:
    result: dict[str, httpx.Response] = {}

    def post() -> None:
        with contextlib.suppress(httpx.TransportError):
            result["response"] = server.post("/api/task", body)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, result


def exec_of_cli(server: AgentServer, within: float = 20.0) -> int:
    """The CLI's pid once it has exec'd the binary: between fork and exec, /proc shows
    the forked copy of the server's own memory, which is not what the CLI holds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for pid in server.children():
            with contextlib.suppress(OSError):
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if b"claude" in argv0:
                    return pid
        time.sleep(0.02)  # polling for a process to appear, not for time to pass
    raise AssertionError("no CLI process appeared")


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


@pytest.mark.parametrize(
    ("kind", "env_name"),
    [("oauth_token", "CLAUDE_CODE_OAUTH_TOKEN"), ("api_key", "ANTHROPIC_API_KEY")],
)
def test_the_cli_spends_the_turns_credential_through_the_forwarder_without_holding_it(
    sim: SimulatorProcess, start_server: StartServer, kind: str, env_name: str
) -> None:
    baseline = oat("baseline")
    secret = oat("override") if kind == "oauth_token" else api_key("override")
    sim.control.register(baseline, kind="oauth", label="baseline")
    sim.control.register(secret, kind="oauth" if kind == "oauth_token" else "api_key", label="ov")
    sim.control.set_latency(1_500)  # the CLI is mid-turn while its /proc is read
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=baseline)

    thread, result = in_background(server, turn(auth_override={kind: secret}))
    pid = exec_of_cli(server)
    environ_bytes = Path(f"/proc/{pid}/environ").read_bytes()
    environ = environ_of(pid)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    home = Path(environ["HOME"])
    thread.join(timeout=60)
    sim.control.set_latency(0)

    response = result["response"]
    assert response.status_code == 200, response.text
    answer = TaskResponse.model_validate(response.json())
    assert answer.response.startswith("Simulated reply")
    # a plan's answers carry the unified headers (a key's do not): the forwarder kept
    # them and the turn's answer carries them
    if kind == "oauth_token":
        assert answer.upstream_ratelimit is not None
        assert "anthropic-ratelimit-unified-5h-utilization" in answer.upstream_ratelimit
    else:
        assert answer.upstream_ratelimit is None
    # upstream got the real credential, once, in its own header shape
    assert set(seen(sim)) == {("oauth" if kind == "oauth_token" else "api_key", "ov")}
    # the CLI held a capability in the matching variable, and no secret anywhere
    assert environ[env_name].startswith(CAPABILITY_PREFIX)
    assert environ["ANTHROPIC_BASE_URL"] != sim.base_url
    assert environ["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    for value in (secret, baseline, server.env["TRINITY_AGENT_SECRET"]):
        assert value.encode() not in environ_bytes
        assert value.encode() not in argv
        assert files_holding(cwd, value) == []
        assert files_holding(home, value) == []


def test_a_capability_is_refused_once_its_turn_is_over(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.set_latency(1_000)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    thread, result = in_background(server, turn())
    environ = environ_of(exec_of_cli(server))
    thread.join(timeout=60)
    sim.control.set_latency(0)
    sim.control.clear_requests()
    replay = server.forwarder_post(
        environ["ANTHROPIC_BASE_URL"],
        "/v1/messages",
        headers={"authorization": f"Bearer {environ['CLAUDE_CODE_OAUTH_TOKEN']}"},
        json={"model": "claude-sonnet-5-5", "max_tokens": 1, "messages": []},
    )

    assert result["response"].status_code == 200
    assert replay.status_code == 401
    assert seen(sim) == []


def test_after_a_reload_no_file_an_agent_can_reach_holds_the_token(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    old, new = oat("old"), oat("new")
    sim.control.register(old, kind="oauth", label="sub-old")
    sim.control.register(new, kind="oauth", label="sub-new")
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=old)

    reloaded = server.post("/api/credentials/reload-token", {"token": new})
    served = server.post("/api/task", turn())

    assert reloaded.status_code == 200, reloaded.text
    assert served.status_code == 200, served.text
    assert seen(sim) == [("oauth", "sub-new")]
    places = [Path(server.env["TRINITY_AGENT_HOME"])]
    if "TRINITY_AGENT_WORK_AREA" in server.env:
        places.append(Path(server.env["TRINITY_AGENT_WORK_AREA"]))
    for place in places:
        assert files_holding(place, new) == [], place
