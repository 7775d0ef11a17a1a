"""End to end: a real simulator, a real agent server process, the real Claude Code CLI.

Every assertion about credentials is made on what the simulator saw: which auth kind
and which registered credential label each Messages request carried.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agent_server.contract import AUTH_OVERRIDE_HEADER, ErrorBody, TaskResponse
from tests.agent_server.conftest import StartServer
from tests.agent_server.support import AgentServer, agent_env, turn

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

pytestmark = pytest.mark.e2e


def oat(tag: str) -> str:
    return f"sk-ant-oat01-{tag}-{secrets.token_hex(8)}"


def api_key(tag: str) -> str:
    return f"sk-ant-api03-{tag}-{secrets.token_hex(8)}"


def seen(sim: SimulatorProcess) -> list[tuple[str, str | None]]:
    """(auth_kind, credential label) of every Messages request the simulator served."""
    return [
        (record["auth_kind"], record["credential"])
        for record in sim.control.requests()
        if record["path"].startswith("/v1/messages")
    ]


def error_of(response: httpx.Response) -> ErrorBody:
    return ErrorBody.model_validate(response.json())


def test_a_turn_runs_on_the_baseline_subscription(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    response = server.post("/api/task", turn(message="say hi"))

    assert response.status_code == 200, response.text
    body = TaskResponse.model_validate(response.json())
    assert body.response.startswith("Simulated reply")
    assert body.usage.input_tokens > 0 and body.usage.output_tokens > 0
    assert body.model == "claude-sonnet-5-5"  # the CLI's default on a subscription (2.1.332)
    assert body.cost_usd is not None and body.cost_usd > 0
    assert AUTH_OVERRIDE_HEADER not in response.headers
    assert set(seen(sim)) == {("oauth", "sub-a")}


@pytest.mark.parametrize("window", ["five_hour", "seven_day"])
def test_an_exhausted_plan_window_is_a_429_with_its_reset(
    sim: SimulatorProcess, start_server: StartServer, window: str
) -> None:
    token = oat("full")
    sim.control.register(token, kind="oauth", label="sub-full")
    view = sim.control.set_usage(token, window, percent=100)  # type: ignore[arg-type]
    sim_reset = datetime.fromisoformat(str(view["windows"][window]["resets_at"]))
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    response = server.post("/api/task", turn())

    assert response.status_code == 429, response.text
    error = error_of(response)
    assert error.error_code == "rate_limit"
    assert "limit" in error.detail
    # The CLI prints the reset to the minute; the parse must land within that minute.
    assert error.resets_at is not None
    assert abs(error.resets_at - sim_reset) <= timedelta(seconds=61)
    assert set(seen(sim)) == {("oauth", "sub-full")}


def test_a_revoked_token_is_an_auth_failure(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("revoked")
    sim.control.register(token, kind="oauth", label="sub-revoked")
    sim.control.revoke(token)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    response = server.post("/api/task", turn())

    assert response.status_code == 503, response.text
    assert error_of(response).error_code == "auth"
    assert error_of(response).resets_at is None


def test_a_key_without_credit_is_an_auth_failure(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    key = api_key("broke")
    sim.control.register(key, kind="api_key", label="key-broke", credit_usd=0)
    server = start_server(ANTHROPIC_API_KEY=key)

    response = server.post("/api/task", turn())

    assert response.status_code == 503, response.text
    error = error_of(response)
    assert error.error_code == "auth"
    assert "Credit balance is too low" in error.detail
    assert set(seen(sim)) == {("api_key", "key-broke")}


def test_an_unknown_model_is_model_unsupported(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    response = server.post("/api/task", turn(model="claude-nope-1"))

    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error.error_code == "model_unsupported"
    assert "claude-nope-1" in error.detail


@pytest.mark.parametrize(
    ("kind", "field", "auth_kind"),
    [("oauth", "oauth_token", "oauth"), ("api_key", "api_key", "api_key")],
)
def test_an_override_runs_on_the_credential_it_names_and_is_echoed(
    sim: SimulatorProcess, start_server: StartServer, kind: str, field: str, auth_kind: str
) -> None:
    base = oat("base")
    sim.control.register(base, kind="oauth", label="sub-base")
    override = oat("other") if kind == "oauth" else api_key("platform")
    sim.control.register(override, kind=kind, label="the-override")  # type: ignore[arg-type]
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=base)

    response = server.post("/api/task", turn(auth_override={field: override}))

    assert response.status_code == 200, response.text
    assert response.headers[AUTH_OVERRIDE_HEADER] == field
    assert set(seen(sim)) == {(auth_kind, "the-override")}
    # the override was for that spawn only
    sim.control.clear_requests()
    assert server.post("/api/task", turn()).status_code == 200
    assert set(seen(sim)) == {("oauth", "sub-base")}


def test_an_override_is_echoed_on_a_refusal_too(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    base = oat("base")
    broke = api_key("broke")
    sim.control.register(base, kind="oauth", label="sub-base")
    sim.control.register(broke, kind="api_key", label="key-broke", credit_usd=0)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=base)

    response = server.post("/api/task", turn(auth_override={"api_key": broke}))

    assert response.status_code == 503
    assert error_of(response).error_code == "auth"
    assert response.headers[AUTH_OVERRIDE_HEADER] == "api_key"
    assert set(seen(sim)) == {("api_key", "key-broke")}


def post_in_background(
    server: Any, body: dict[str, Any]
) -> tuple[threading.Thread, dict[str, httpx.Response]]:
    """POST from a thread; the answer lands in result["response"] (none if the line broke)."""
    result: dict[str, httpx.Response] = {}

    def post() -> None:
        with contextlib.suppress(httpx.TransportError):
            result["response"] = server.post("/api/task", body)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, result


def test_a_killed_cli_is_runtime_killed_never_auth(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.set_latency(30_000)  # the upstream hangs, so the CLI is mid-turn
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    thread, result = post_in_background(server, turn(timeout_seconds=60))
    child = server.await_child()
    os.killpg(child, signal.SIGKILL)  # the CLI leads its own process group
    thread.join(timeout=30)

    response = result["response"]
    assert response.status_code == 500, response.text
    error = error_of(response)
    assert error.error_code == "runtime_killed"
    assert "SIGKILL" in error.detail


def test_a_turn_past_its_timeout_is_504_and_leaves_no_process(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.set_latency(30_000)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    started = time.monotonic()
    response = server.post("/api/task", turn(timeout_seconds=2))

    assert response.status_code == 504, response.text
    assert error_of(response).error_code == "timeout"
    assert time.monotonic() - started < 10
    assert server.children() == []


def test_reload_token_switches_the_next_turn_but_not_the_running_one(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    old, new = oat("old"), oat("new")
    sim.control.register(old, kind="oauth", label="sub-old")
    sim.control.register(new, kind="oauth", label="sub-new")
    sim.control.set_latency(1_500)
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=old)

    thread, running = post_in_background(server, turn())
    server.await_child()  # the running turn's environment is fixed from here on
    reloaded = server.post("/api/credentials/reload-token", {"token": new})
    sim.control.set_latency(0)
    after = server.post("/api/task", turn())
    thread.join(timeout=60)

    assert reloaded.status_code == 200, reloaded.text
    assert reloaded.json() == {"status": "ok", "reloaded": True, "env_shadow": []}
    assert running["response"].status_code == 200
    assert after.status_code == 200
    assert sorted(seen(sim)) == [("oauth", "sub-new"), ("oauth", "sub-old")]


@pytest.mark.parametrize("guard", ["0", "1"])
def test_a_dotenv_api_key_never_shadows_the_baseline_subscription(
    sim: SimulatorProcess, start_server: StartServer, guard: str
) -> None:
    token, stale = oat("sub"), api_key("stale")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.register(stale, kind="api_key", label="stale-key")
    server = start_server(
        dotenv=f"ANTHROPIC_API_KEY={stale}\n",
        CLAUDE_CODE_OAUTH_TOKEN=token,
        TRINITY_AGENT_BOOT_GUARD=guard,
    )

    assert server.post("/api/task", turn()).status_code == 200
    # The .env allowlist refuses credentials, guard or not.
    assert set(seen(sim)) == {("oauth", "sub-a")}


def test_reload_token_still_reports_a_dotenv_key_it_never_lets_through(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    stale, token = api_key("stale"), oat("sub")
    sim.control.register(stale, kind="api_key", label="stale-key")
    sim.control.register(token, kind="oauth", label="sub-a")
    server = start_server(dotenv=f"ANTHROPIC_API_KEY={stale}\n")

    kept = server.post("/api/credentials/reload-token", {"token": token})
    assert server.post("/api/task", turn()).status_code == 200

    assert kept.json()["env_shadow"] == ["ANTHROPIC_API_KEY"]
    assert set(seen(sim)) == {("oauth", "sub-a")}


def test_a_dotenv_base_url_does_not_move_where_the_cli_sends_its_request(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    with socket.socket() as elsewhere:
        # A listener that would receive the request (and its credential) if the .env
        # moved the CLI; it never accepts, so a redirected turn would time out.
        elsewhere.bind(("127.0.0.1", 0))
        elsewhere.listen()
        port = elsewhere.getsockname()[1]
        server = start_server(
            dotenv=(
                f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}\n"
                f"HTTPS_PROXY=http://127.0.0.1:{port}\n"
                "NODE_OPTIONS=--require=/nonexistent/hook.js\n"
            ),
            CLAUDE_CODE_OAUTH_TOKEN=token,
        )
        response = server.post("/api/task", turn(timeout_seconds=30))

    assert response.status_code == 200, response.text
    assert set(seen(sim)) == {("oauth", "sub-a")}


def test_a_chat_session_resumes_its_transcript(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token = oat("sub")
    sim.control.register(token, kind="oauth", label="sub-a")
    server = start_server(CLAUDE_CODE_OAUTH_TOKEN=token)

    first = server.post("/api/chat", turn(session_id="chat-1", message="first question"))
    second = server.post("/api/chat", turn(session_id="chat-1", message="second question"))

    assert first.status_code == second.status_code == 200, second.text
    assert second.json()["session_id"] == "chat-1"
    assert second.json()["response"] == "Simulated reply: second question"
    # the resumed turn sent the first exchange too, so it counted more input
    assert second.json()["usage"]["input_tokens"] > first.json()["usage"]["input_tokens"]


def test_no_credential_value_reaches_a_log_line_or_a_response(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    secret = f"canary-secret-{secrets.token_hex(12)}"
    base, dotenv_key, override = oat("canary-base"), api_key("canary-env"), oat("canary-ovr")
    override_key, reload, revoked = api_key("canary-key"), oat("canary-rl"), oat("canary-rev")
    github = f"ghp_canary{secrets.token_hex(12)}"
    for token, kind in (
        (base, "oauth"),
        (override, "oauth"),
        (reload, "oauth"),
        (revoked, "oauth"),
        (override_key, "api_key"),
        (dotenv_key, "api_key"),
    ):
        sim.control.register(token, kind=kind)  # type: ignore[arg-type]
    sim.control.revoke(revoked)
    canaries = [secret, base, dotenv_key, override, override_key, reload, revoked, github]
    server = start_server(
        dotenv=f"ANTHROPIC_API_KEY={dotenv_key}\nGITHUB_TOKEN={github}\n",
        log_level="debug",
        TRINITY_AGENT_SECRET=secret,
        CLAUDE_CODE_OAUTH_TOKEN=base,
    )
    assert server.client is not None
    responses = [
        # the simulator echoes the prompt, so these answers would carry the values
        server.post("/api/task", turn(message=f"echo {base}")),
        server.post(
            "/api/task", turn(message=f"echo {github}", auth_override={"oauth_token": override})
        ),
        server.post("/api/chat", turn(session_id="c", auth_override={"api_key": override_key})),
        # the CLI quotes a rejected model name in its error sentence
        server.post("/api/task", turn(model=override)),
        server.post("/api/task", turn(auth_override={"oauth_token": revoked})),
        # a malformed body must not be echoed back
        server.post("/api/task", {"execution_id": "x", "auth_override": {"api_key": override_key}}),
        server.post("/api/credentials/reload-token", {"token": reload, "remove_api_key": True}),
        server.post("/api/task", turn(message=f"echo {reload}")),
        server.client.post("/api/task", json=turn(), headers={"Authorization": f"Bearer {base}"}),
        server.client.get("/health"),
    ]
    codes = [r.status_code for r in responses]
    server.stop()

    assert codes == [200, 200, 200, 400, 503, 400, 200, 200, 401, 200]
    transcript = "\n".join(
        [r.text + "\n" + "\n".join(f"{k}: {v}" for k, v in r.headers.items()) for r in responses]
        + [server.log_text(), "".join(server.stdout_lines)]
    )
    leaked = [value for value in canaries if value in transcript]
    assert leaked == []
    # the redaction really ran on the paths that would have leaked
    assert "[redacted:…" in responses[0].json()["response"]
    assert "[redacted:…" in responses[3].json()["detail"]
    assert "turn " in server.log_text()  # the server did log its turns


def test_the_direct_api_runtime_serves_and_classifies(
    sim: SimulatorProcess, start_server: StartServer
) -> None:
    token, other_key = oat("sub"), api_key("platform")
    sim.control.register(token, kind="oauth", label="sub-a")
    sim.control.register(other_key, kind="api_key", label="platform")
    server = start_server(
        TRINITY_AGENT_RUNTIME="anthropic-api",
        TRINITY_AGENT_MODEL="claude-sonnet-5",
        CLAUDE_CODE_OAUTH_TOKEN=token,
    )

    ok = server.post("/api/task", turn(message="hello"))
    by_key = server.post("/api/task", turn(auth_override={"api_key": other_key}))
    view = sim.control.set_usage(token, "five_hour", percent=100)
    limited = server.post("/api/task", turn())
    missing = server.post("/api/task", turn(model="claude-nope-1"))

    assert ok.status_code == 200, ok.text
    assert ok.json()["response"] == "Simulated reply: hello"
    assert ok.json()["model"] == "claude-sonnet-5"
    assert by_key.status_code == 200
    assert by_key.headers[AUTH_OVERRIDE_HEADER] == "api_key"
    assert limited.status_code == 429
    # the direct API reads the reset header, so it is exact
    reset = datetime.fromisoformat(str(view["windows"]["five_hour"]["resets_at"]))
    assert error_of(limited).resets_at == reset.replace(microsecond=0) + timedelta(
        seconds=1 if reset.microsecond else 0
    )
    assert missing.status_code == 400
    assert error_of(missing).error_code == "model_unsupported"
    assert seen(sim) == [
        ("oauth", "sub-a"),
        ("api_key", "platform"),
        ("oauth", "sub-a"),
        ("oauth", "sub-a"),
    ]


def test_a_killed_agent_server_takes_its_running_cli_with_it(tmp_path: Path) -> None:
    # A stand-in CLI that hangs: what is pinned is the server's process hygiene.
    fake = tmp_path / "hanging-claude"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    home = tmp_path / "agent"
    home.mkdir()
    server = AgentServer(
        env=agent_env(
            simulator_url="http://127.0.0.1:9",
            home=home,
            secret="hygiene-secret-123",
            TRINITY_CLAUDE_BIN=str(fake),
        ),
        log_path=tmp_path / "agent.log",
    )
    with server:
        thread, _ = post_in_background(server, turn(timeout_seconds=60))
        child = server.await_child()
        os.kill(server.pid, signal.SIGKILL)
        thread.join(timeout=30)
        assert wait_until_gone(child)
        assert not thread.is_alive()


def wait_until_gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True  # dead, awaiting its reaper
        time.sleep(0.02)  # polling for the kernel to deliver the kill, not for time
    return False
