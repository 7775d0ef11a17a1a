"""End to end: the real Codex CLI (the pinned 0.169.0) in a real agent server process,
reaching the simulator's Codex endpoints only through the forwarder.

Every credential assertion is made on what the simulator saw (the path, the auth
kind and the registered label of each Responses request); what the CLI held is read
from `/proc/<cli pid>/` mid-turn and from the files it left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import secrets
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agent_server.contract import AUTH_OVERRIDE_HEADER, ErrorBody, TaskResponse
from tests.agent_server.conftest import StartServer
from tests.agent_server.support import AgentServer, files_holding, turn
from tests.clis import codex_cli

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

pytestmark = pytest.mark.e2e

PLAN_PATH = "/backend-api/codex/responses"
KEY_PATH = "/v1/responses"
CAPABILITY_PREFIX = "trinity-cap-"


@pytest.fixture(scope="module", autouse=True)
def codex() -> str:
    """The CLI the agent server resolves (``tests/clis.py``); missing, these tests fail."""
    return codex_cli()


def plan_token(tag: str, account: str | None = None) -> str:
    """A ChatGPT access token shaped like the real ones (a JWT), naming `account`."""
    claims: dict[str, Any] = {"sub": tag, "nonce": secrets.token_hex(8)}
    if account is not None:
        claims["https://api.openai.com/auth"] = {"chatgpt_account_id": account}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJub25lIn0.{payload}.sig"


def openai_key(tag: str) -> str:
    return f"sk-proj-{tag}-{secrets.token_hex(8)}"


def seen(sim: SimulatorProcess) -> list[tuple[str, str, str | None]]:
    """(path, auth kind, credential label) of every Responses request the simulator got."""
    return [(r["path"], r["auth_kind"], r["credential"]) for r in sim.control.requests()]


def error_of(response: httpx.Response) -> ErrorBody:
    return ErrorBody.model_validate(response.json())


@pytest.fixture
def start_codex(sim: SimulatorProcess, start_server: StartServer) -> StartServer:
    """An agent server on the codex-cli runtime whose forwarder spends plans and keys
    at the simulator."""

    def start(**env: str) -> AgentServer:
        return start_server(
            TRINITY_AGENT_RUNTIME="codex-cli",
            TRINITY_CODEX_BASE_URL=sim.base_url,
            TRINITY_OPENAI_BASE_URL=sim.base_url,
            **env,
        )

    return start


def register_plan(sim: SimulatorProcess, label: str) -> str:
    token = plan_token(label)
    sim.control.register(token, kind="codex", label=label, account_id=f"acct-{label}")
    return token


def test_a_codex_plan_turn_is_served_through_the_forwarder(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    token = register_plan(sim, "plan-a")
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-a")

    response = server.post("/api/task", turn(message="say hi"))

    assert response.status_code == 200, response.text
    body = TaskResponse.model_validate(response.json())
    assert body.response == "Simulated reply: say hi"
    assert body.model == "gpt-5.5-codex"
    assert body.usage.input_tokens > 0
    assert body.usage.output_tokens == len("Simulated reply: say hi") // 4
    # metered by the forwarder (a plan's turn priced as the key would bill it)
    assert body.metered is not None and body.metered.requests == 1
    assert set(body.metered.by_model) == {"gpt-5.5-codex"}
    assert body.cost_usd == body.metered.cost_usd > 0
    # the plan's headroom, read off the answer the forwarder relayed
    assert body.upstream_ratelimit is not None
    assert body.upstream_ratelimit["x-codex-primary-window-minutes"] == "300"
    assert body.upstream_ratelimit["x-codex-secondary-window-minutes"] == "10080"
    assert float(body.upstream_ratelimit["x-codex-primary-used-percent"]) > 0
    # one request, to the plan's path, with the plan's token and its account
    assert seen(sim) == [(PLAN_PATH, "codex", "plan-a")]


def test_a_streamed_codex_turn_shows_its_text_then_the_result(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    token = register_plan(sim, "plan-a")
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-a")
    assert server.client is not None
    body = turn(message="say hi", stream=True)

    with server.client.stream("POST", "/api/task", json=body) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]

    texts = [line["event"]["text"] for line in lines[:-1] if line["event"]["kind"] == "text"]
    assert lines[0]["event"]["kind"] == "text"  # text before the result
    assert "".join(texts) == "Simulated reply: say hi"
    result = lines[-1]
    assert result["type"] == "result" and result["status"] == 200, result
    assert result["body"]["response"] == "Simulated reply: say hi"
    assert result["body"]["execution_id"] == body["execution_id"]


@pytest.mark.parametrize("window", ["five_hour", "seven_day"])
def test_a_used_up_plan_window_is_a_rate_limit_with_the_upstreams_reset(
    sim: SimulatorProcess, start_codex: StartServer, window: str
) -> None:
    token = register_plan(sim, "plan-full")
    view = sim.control.set_usage(token, window, percent=100)  # type: ignore[arg-type]
    sim_reset = datetime.fromisoformat(str(view["windows"][window]["resets_at"]))
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-full")

    response = server.post("/api/task", turn())

    assert response.status_code == 429, response.text
    error = error_of(response)
    assert error.error_code == "rate_limit"
    assert "usage limit" in error.detail
    # exact: the reset the upstream answer carried (whole seconds, rounded up so it is
    # never early), not the CLI's "try again later"
    assert error.resets_at is not None
    assert error.resets_at.timestamp() == math.ceil(sim_reset.timestamp())
    assert error.limiting_window == window
    assert seen(sim) == [(PLAN_PATH, "codex", "plan-full")]  # no retry


def test_a_revoked_plan_is_an_auth_failure(sim: SimulatorProcess, start_codex: StartServer) -> None:
    token = register_plan(sim, "plan-revoked")
    sim.control.revoke(token)
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-revoked")

    response = server.post("/api/task", turn())

    assert response.status_code == 503, response.text
    error = error_of(response)
    assert error.error_code == "auth"
    assert error.resets_at is None
    assert "token_invalidated" in error.detail


def test_an_unknown_model_is_model_unsupported(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    token = register_plan(sim, "plan-a")
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-a")

    response = server.post("/api/task", turn(model="gpt-nope-1"))

    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error.error_code == "model_unsupported"
    assert "gpt-nope-1" in error.detail


def test_the_openai_key_rung_is_served_on_v1_responses_and_echoed(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    token, key = register_plan(sim, "plan-a"), openai_key("platform")
    sim.control.register(key, kind="openai_key", label="platform-key")
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-a")

    response = server.post("/api/task", turn(auth_override={"api_key": key}))

    assert response.status_code == 200, response.text
    assert response.headers[AUTH_OVERRIDE_HEADER] == "api_key"
    assert response.json()["response"] == "Simulated reply: say hi"
    assert "upstream_ratelimit" not in response.json()  # a key has no plan windows
    assert seen(sim) == [(KEY_PATH, "openai_key", "platform-key")]


def test_a_key_without_credit_is_a_billing_refusal(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    key = openai_key("broke")
    sim.control.register(key, kind="openai_key", label="broke-key", credit_usd=0)
    server = start_codex(OPENAI_API_KEY=key)

    response = server.post("/api/task", turn())

    assert response.status_code == 503, response.text
    error = error_of(response)
    # auth on the wire, with the provider's own billing words for the platform's trail
    assert error.error_code == "auth"
    assert "insufficient_quota" in error.detail
    assert "billing" in error.detail


def test_an_override_plan_is_spent_with_the_account_its_token_names(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    base = register_plan(sim, "plan-base")
    other = plan_token("plan-other", account="acct-other")
    sim.control.register(other, kind="codex", label="plan-other", account_id="acct-other")
    server = start_codex(CODEX_ACCESS_TOKEN=base, CODEX_ACCOUNT_ID="acct-plan-base")

    response = server.post("/api/task", turn(auth_override={"oauth_token": other}))

    assert response.status_code == 200, response.text
    assert response.headers[AUTH_OVERRIDE_HEADER] == "oauth_token"
    # the simulator refuses a chatgpt-account-id that is not the token's (403)
    assert seen(sim) == [(PLAN_PATH, "codex", "plan-other")]


def test_an_override_plan_is_spent_with_the_account_the_platform_names(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    # The account comes from auth.json's tokens.account_id, which the token need not name.
    base = register_plan(sim, "plan-base")
    other = plan_token("plan-named")
    sim.control.register(other, kind="codex", label="plan-named", account_id="acct-named")
    server = start_codex(CODEX_ACCESS_TOKEN=base, CODEX_ACCOUNT_ID="acct-plan-base")

    named = {"oauth_token": other, "account_id": "acct-named"}
    response = server.post("/api/task", turn(auth_override=named))

    assert response.status_code == 200, response.text
    assert seen(sim) == [(PLAN_PATH, "codex", "plan-named")]


def test_a_chat_session_resumes_its_thread_across_a_server_restart(
    sim: SimulatorProcess, start_codex: StartServer, tmp_path: Path
) -> None:
    token = register_plan(sim, "plan-a")
    server = start_codex(CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-a")

    first = server.post("/api/chat", turn(session_id="chat-1", message="first question"))
    second = server.post("/api/chat", turn(session_id="chat-1", message="second question"))
    server.stop()
    again = AgentServer(env=server.env, log_path=tmp_path / "again.log").start()
    try:
        third = again.post("/api/chat", turn(session_id="chat-1", message="third question"))
    finally:
        again.stop()

    for answer in (first, second, third):
        assert answer.status_code == 200, answer.text
    assert second.json()["session_id"] == "chat-1"
    assert third.json()["response"] == "Simulated reply: third question"
    # each request carried the history before it: the simulator counted its messages
    counts = [r["messages"] for r in sim.control.requests()]
    assert counts[0] < counts[1] < counts[2]
    assert counts[2] - counts[1] == counts[1] - counts[0] == 2  # one question, one answer
    # each answer counts its own turn's tokens, not the thread's running total
    assert second.json()["usage"]["output_tokens"] == len("Simulated reply: second question") // 4
    assert first.json()["usage"]["input_tokens"] < second.json()["usage"]["input_tokens"]


def cli_pid(server: AgentServer, within: float = 20.0) -> int:
    """The Codex CLI's pid once it has exec'd the binary (before exec, /proc shows the
    forked copy of the server's own memory)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for pid in server.children():
            with contextlib.suppress(OSError):
                if b"codex" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                    return pid
        time.sleep(0.02)  # polling for a process to appear, not for time to pass
    raise AssertionError("no Codex CLI process appeared")


def test_neither_the_capability_nor_the_token_reaches_the_agents_files_env_logs_or_answer(
    sim: SimulatorProcess, start_codex: StartServer
) -> None:
    token = register_plan(sim, "plan-canary")
    sim.control.set_latency(1_500)  # the CLI is mid-turn while its /proc is read
    server = start_codex(
        CODEX_ACCESS_TOKEN=token, CODEX_ACCOUNT_ID="acct-plan-canary", log_level="debug"
    )
    result: dict[str, httpx.Response] = {}
    body = turn(session_id="canary", message="say hi")
    thread = threading.Thread(target=lambda: result.update(r=server.post("/api/chat", body)))
    thread.start()
    pid = cli_pid(server)
    environ_raw = Path(f"/proc/{pid}/environ").read_bytes()
    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    thread.join(timeout=60)
    sim.control.set_latency(0)
    environ = dict(item.split("=", 1) for item in environ_raw.decode().split("\0") if "=" in item)
    capability = environ["OPENAI_API_KEY"]
    server.stop()

    answer = result["r"]
    assert answer.status_code == 200, answer.text
    assert capability.startswith(CAPABILITY_PREFIX)
    assert environ["HTTPS_PROXY"] == "http://127.0.0.1:9"  # an outside call dies at once
    codex_home = Path(environ["CODEX_HOME"])
    assert (codex_home / "config.toml").is_file()
    assert not (codex_home / "auth.json").exists()  # API-key mode: no sign-in at all
    places = [codex_home, Path(server.env["TRINITY_AGENT_HOME"])]
    places.append(Path(server.env["TRINITY_AGENT_WORK_AREA"]))
    transcript = answer.text + server.log_text() + "".join(server.stdout_lines)
    for secret in (token, capability, server.env["TRINITY_AGENT_SECRET"]):
        assert secret.encode() not in argv
        assert secret not in transcript
        for place in places:
            assert files_holding(place, secret) == [], place
    assert token.encode() not in environ_raw
    assert seen(sim) == [(PLAN_PATH, "codex", "plan-canary")]


def test_the_config_switches_off_everything_that_phones_out() -> None:
    """Every turn runs the CLI with --strict-config, so the served turns above prove
    the CLI still reads each of these keys; this pins that they are there."""
    import tomllib

    from agent_server.runtimes.codex_home import codex_config

    text = codex_config(forwarder_v1="http://127.0.0.1:9/v1", model="gpt-5.5-codex")
    config = tomllib.loads(text)
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"] == {"enabled": False}
    assert config["feedback"] == {"enabled": False}
    assert config["otel"] == {"exporter": "none"}
    assert config["features"] == {"plugins": False}
    assert set(config["model_providers"]) == {config["model_provider"]}
    # The CLI's own command sandbox: its default outside ours, off inside ours.
    assert "sandbox_mode" not in config
    inside = tomllib.loads(
        codex_config(forwarder_v1="http://127.0.0.1:9/v1", model="gpt-5.5-codex", sandboxed=True)
    )
    assert inside["sandbox_mode"] == "danger-full-access"
