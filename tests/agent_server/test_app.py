"""The HTTP surface, in process, over a recording runtime.

These pin the server's own behaviour (auth gate, override echo, reload-token, error
rendering, redaction of what it returns). Runtime behaviour against the real CLI is
pinned by test_e2e.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from agent_server.app import create_app
from agent_server.config import AgentConfig
from agent_server.contract import AUTH_OVERRIDE_HEADER, ErrorBody, TaskResponse
from agent_server.errors import TurnError
from agent_server.forwarder import CAPABILITY_PREFIX, Forwarder
from agent_server.runtimes.base import Turn, TurnOutcome
from trinity_contract.proof import health_proof, new_nonce, proof_matches

SECRET = "agent-shared-secret-0001"
AUTH = {"Authorization": f"Bearer {SECRET}"}
BASE_OAT = "sk-ant-oat01-baseline-token-aaaa"
OVERRIDE_OAT = "sk-ant-oat01-override-token-bbbb"
OVERRIDE_KEY = "sk-ant-api03-override-key-cccc"


CREDENTIAL_NAMES = ("CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@dataclass
class RecordingRuntime:
    """Records each turn and its env; answers with `outcome` or raises `error`.

    Like the CLI, it runs agent code in a child, so it gets forwarder capabilities.
    `calls` records the env as the upstream would see its credential: each
    capability resolved through the forwarder while the turn runs (what it would
    send upstream). `given` records the env exactly as the runtime got it.
    """

    name: str = "recording"
    calls: list[tuple[Turn, dict[str, str]]] = field(default_factory=list)
    given: list[dict[str, str]] = field(default_factory=list)
    error: TurnError | None = None
    response: str = "done"
    forwarder: Forwarder | None = None

    async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
        self.given.append(dict(env))
        resolved = dict(env)
        for name in CREDENTIAL_NAMES:
            if name in resolved:
                assert self.forwarder is not None, "a credential variable without a forwarder"
                grant = self.forwarder.find(resolved[name])
                assert grant is not None, f"{name} holds no live capability"
                resolved[name] = grant.secret
        self.calls.append((turn, resolved))
        if self.error is not None:
            raise self.error
        return TurnOutcome(
            response=self.response,
            model="claude-sonnet-5",
            input_tokens=3,
            output_tokens=4,
            cost_usd=0.01,
        )

    async def aclose(self) -> None:
        return None


def make_config(home: Path, **changes: object) -> AgentConfig:
    values: dict[str, object] = {
        "secret": SECRET,
        "runtime": "claude-code",
        "model": None,
        "home": home,
        "timeout_max": None,
        "claude_bin": "claude",
        "boot_guard": True,
        "work_area": home / "area",
    }
    values.update(changes)
    return AgentConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def runtime() -> RecordingRuntime:
    return RecordingRuntime()


@pytest.fixture
def client(tmp_path: Path, runtime: RecordingRuntime) -> Iterator[TestClient]:
    app = create_app(
        make_config(tmp_path),
        runtime=runtime,
        baseline={"CLAUDE_CODE_OAUTH_TOKEN": BASE_OAT, "PATH": "/usr/bin"},
    )
    runtime.forwarder = app.state.forwarder
    with TestClient(app) as test_client:
        yield test_client


def task(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {"execution_id": "exec-1", "message": "hi", "timeout_seconds": 30}
    body.update(changes)
    return body


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": SECRET},
        {"Authorization": f"Basic {SECRET}"},
        {"Authorization": f"Bearer {SECRET}x"},
    ],
)
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/task", task()),
        ("/api/chat", task(session_id="s")),
        ("/api/credentials/reload-token", {"token": "sk-ant-oat01-new"}),
        ("/api/task", {"not": "even valid"}),
    ],
)
def test_without_the_secret_it_answers_401_and_runs_nothing(
    client: TestClient,
    runtime: RecordingRuntime,
    tmp_path: Path,
    headers: dict[str, str],
    path: str,
    body: dict[str, object],
) -> None:
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["error_code"] == "unauthorized"
    assert runtime.calls == []
    assert not (tmp_path / ".trinity" / "oauth_token").exists()


def test_health_needs_no_secret(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "runtime": "claude-code",
        "model": None,
        "busy": 0,
        "proof": None,
        "isolation": "same-user",  # a config without an agent user
        "isolation_missing": [
            "root: the agent server is not root, so the CLI runs as the server's own user"
        ],
        "egress_guard": False,
    }


def test_health_proves_the_secret_for_the_nonce_it_was_asked(tmp_path: Path) -> None:
    # Built here, not from the fixture: the proof must follow the configured secret.
    for index, secret in enumerate((SECRET, "another-agents-secret-0002")):
        home = tmp_path / f"home-{index}"
        home.mkdir()
        app = create_app(make_config(home, secret=secret), runtime=RecordingRuntime())
        with TestClient(app) as test_client:
            for nonce in (new_nonce(), new_nonce()):
                response = test_client.get("/health", params={"nonce": nonce})
                assert response.status_code == 200
                proof = response.json()["proof"]
                assert proof == health_proof(secret=secret, nonce=nonce)
                assert proof_matches(secret=secret, nonce=nonce, proof=proof)


@pytest.mark.parametrize("nonce", ["", "abc", "Z" * 64, "0" * 129])
def test_health_refuses_a_nonce_that_is_not_hex_and_signs_nothing(
    client: TestClient, nonce: str
) -> None:
    response = client.get("/health", params={"nonce": nonce})
    assert response.status_code == 400
    assert response.json()["error_code"] == "invalid_request"
    assert "proof" not in response.json()


def test_a_task_answers_with_the_contract_shape(
    client: TestClient, runtime: RecordingRuntime, tmp_path: Path
) -> None:
    response = client.post("/api/task", json=task(), headers=AUTH)
    assert response.status_code == 200
    assert TaskResponse.model_validate(response.json()).model_dump() == {
        "execution_id": "exec-1",
        "response": "done",
        "model": "claude-sonnet-5",
        # The forwarder's sum, not the runtime's report (3/4 tokens, $0.01): this
        # runtime sent nothing through it.
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
        "cost_usd": 0.0,
        "upstream_ratelimit": None,  # no upstream answer was relayed
        "metered": {
            "requests": 0,
            "cost_usd": 0.0,
            "by_model": {},
            "budget_usd": None,
            "budget_refused": 0,
            "unmetered": 0,
        },
    }
    assert "upstream_ratelimit" not in response.json()  # optional: absent, not null
    assert AUTH_OVERRIDE_HEADER not in response.headers
    turn, env = runtime.calls[0]
    assert turn.cwd == tmp_path / "area" / "work"
    assert env["HOME"] == str(turn.home)
    assert turn.home.parent == tmp_path / "area" / "homes"
    assert not turn.home.exists()  # a task's HOME is discarded after the turn
    assert env["CLAUDE_CODE_OAUTH_TOKEN"] == BASE_OAT
    assert "TRINITY_AGENT_SECRET" not in env


def test_the_runtime_gets_a_capability_and_the_forwarder_never_the_secret(
    client: TestClient, runtime: RecordingRuntime
) -> None:
    client.post("/api/task", json=task(auth_override={"api_key": OVERRIDE_KEY}), headers=AUTH)
    given = runtime.given[0]
    forwarder = runtime.forwarder
    assert forwarder is not None
    assert given["ANTHROPIC_API_KEY"].startswith(CAPABILITY_PREFIX)
    assert given["ANTHROPIC_BASE_URL"] == forwarder.base_url
    assert not {"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"} & set(given)
    assert all(OVERRIDE_KEY not in v and BASE_OAT not in v for v in given.values())
    assert forwarder.find(given["ANTHROPIC_API_KEY"]) is None  # the turn is over
    assert forwarder.live_grants == 0


def test_a_dotenv_base_url_cannot_point_the_cli_past_the_forwarder(
    client: TestClient, runtime: RecordingRuntime, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("ANTHROPIC_BASE_URL=http://elsewhere.invalid\n")
    client.post("/api/task", json=task(), headers=AUTH)
    assert runtime.forwarder is not None
    assert runtime.given[0]["ANTHROPIC_BASE_URL"] == runtime.forwarder.base_url


@pytest.mark.parametrize(
    ("override", "header", "sets", "drops"),
    [
        (
            {"oauth_token": OVERRIDE_OAT},
            "oauth_token",
            {"CLAUDE_CODE_OAUTH_TOKEN": OVERRIDE_OAT},
            {"ANTHROPIC_API_KEY"},
        ),
        (
            {"api_key": OVERRIDE_KEY},
            "api_key",
            {"ANTHROPIC_API_KEY": OVERRIDE_KEY},
            {"CLAUDE_CODE_OAUTH_TOKEN"},
        ),
        ({"oauth_token": OVERRIDE_OAT, "api_key": OVERRIDE_KEY}, None, {}, set()),
        ({}, None, {}, set()),
    ],
)
@pytest.mark.parametrize("fails", [False, True])
def test_an_override_applies_to_the_spawn_and_is_echoed_on_success_and_error(
    client: TestClient,
    runtime: RecordingRuntime,
    override: dict[str, str],
    header: str | None,
    sets: dict[str, str],
    drops: set[str],
    fails: bool,
) -> None:
    if fails:
        runtime.error = TurnError("rate_limit", "You've hit your limit")
    response = client.post("/api/task", json=task(auth_override=override), headers=AUTH)
    assert response.status_code == (429 if fails else 200)
    assert response.headers.get(AUTH_OVERRIDE_HEADER) == header
    _, env = runtime.calls[0]
    for name, value in sets.items():
        assert env[name] == value
    assert not drops & set(env)
    if header is None:
        assert env["CLAUDE_CODE_OAUTH_TOKEN"] == BASE_OAT


def test_a_typed_error_renders_status_code_and_resets_at(
    client: TestClient, runtime: RecordingRuntime
) -> None:
    runtime.error = TurnError(
        "rate_limit",
        "You've hit your limit · resets 4:10am (UTC)",
        datetime(2026, 5, 1, 4, 10, tzinfo=UTC),
    )
    response = client.post("/api/task", json=task(), headers=AUTH)
    assert response.status_code == 429
    assert response.json() == {
        "error_code": "rate_limit",
        "detail": "You've hit your limit · resets 4:10am (UTC)",
        "execution_id": "exec-1",
        "resets_at": "2026-05-01T04:10:00Z",
        "limiting_window": None,
        # What the turn's requests spent before it failed (none went upstream here).
        "metered": {
            "requests": 0,
            "cost_usd": 0.0,
            "by_model": {},
            "budget_usd": None,
            "budget_refused": 0,
            "unmetered": 0,
        },
    }


def test_a_rate_limit_renders_the_limiting_window_the_runtime_saw(
    client: TestClient, runtime: RecordingRuntime
) -> None:
    runtime.error = TurnError(
        "rate_limit",
        "API Error: 429 rate_limit_error: weekly limit",
        datetime(2026, 5, 4, 9, 0, tzinfo=UTC),
        "seven_day_sonnet",
    )
    response = client.post("/api/task", json=task(), headers=AUTH)
    assert response.status_code == 429
    body = ErrorBody.model_validate(response.json())
    assert (body.error_code, body.limiting_window) == ("rate_limit", "seven_day_sonnet")


def test_error_details_and_answers_never_carry_a_credential(
    client: TestClient, runtime: RecordingRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    runtime.error = TurnError("auth", f"bad token {OVERRIDE_OAT} and {BASE_OAT}")
    with caplog.at_level(logging.INFO):
        failed = client.post(
            "/api/task", json=task(auth_override={"oauth_token": OVERRIDE_OAT}), headers=AUTH
        )
    runtime.error = None
    runtime.response = f"your env has {BASE_OAT}"
    answered = client.post("/api/task", json=task(), headers=AUTH)
    for text in (failed.text, answered.text):
        assert OVERRIDE_OAT not in text
        assert BASE_OAT not in text
    assert "[redacted:…bbbb]" in failed.json()["detail"]
    # the turn's own log line is redacted at the source too (the process-wide handler
    # filter, pinned by the e2e canary, covers everything else)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("turn exec-1: auth" in line for line in warnings)
    assert not any(OVERRIDE_OAT in line or BASE_OAT in line for line in warnings)


def test_a_malformed_body_is_invalid_request_without_echoing_it(client: TestClient) -> None:
    response = client.post(
        "/api/task",
        json={"execution_id": "e", "message": "", "auth_override": {"api_key": OVERRIDE_KEY}},
        headers=AUTH,
    )
    assert response.status_code == 400
    body = ErrorBody.model_validate(response.json())
    assert body.error_code == "invalid_request"
    assert "timeout_seconds" in body.detail
    assert OVERRIDE_KEY not in response.text


def test_reload_token_sets_the_token_for_the_next_spawn_only(
    client: TestClient, runtime: RecordingRuntime, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-api03-dotenv-key-dddd\n")
    response = client.post(
        "/api/credentials/reload-token",
        json={"token": "sk-ant-oat01-reloaded-eeee", "remove_api_key": True},
        headers=AUTH,
    )
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "reloaded": True,
        "env_shadow": ["ANTHROPIC_API_KEY"],
    }
    assert "sk-ant" not in response.text
    client.post("/api/task", json=task(), headers=AUTH)
    _, env = runtime.calls[0]
    assert env["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-reloaded-eeee"
    assert "ANTHROPIC_API_KEY" not in env


@pytest.mark.parametrize("token", ["", "   "])
def test_reload_token_refuses_an_empty_token(
    client: TestClient, tmp_path: Path, token: str
) -> None:
    response = client.post("/api/credentials/reload-token", json={"token": token}, headers=AUTH)
    assert response.status_code == 400
    assert response.json()["error_code"] == "invalid_request"
    assert not (tmp_path / ".trinity" / "oauth_token").exists()


def test_a_chat_turn_keeps_its_session_home_and_answers_its_session_id(
    client: TestClient, runtime: RecordingRuntime
) -> None:
    first = client.post("/api/chat", json=task(session_id="chat-7"), headers=AUTH)
    second = client.post("/api/chat", json=task(session_id="chat-7"), headers=AUTH)
    assert first.json()["session_id"] == second.json()["session_id"] == "chat-7"
    (turn1, _), (turn2, _) = runtime.calls
    assert turn1.session_id == "chat-7"
    assert turn1.home == turn2.home
    assert turn1.home.is_dir()


def test_timeout_max_bounds_the_requested_timeout(tmp_path: Path) -> None:
    runtime = RecordingRuntime()
    app = create_app(make_config(tmp_path, timeout_max=5.0), runtime=runtime, baseline={})
    with TestClient(app) as test_client:
        test_client.post("/api/task", json=task(timeout_seconds=600), headers=AUTH)
    turn, _ = runtime.calls[0]
    assert 0 < turn.timeout_seconds <= 5.0


def test_an_unexpected_runtime_exception_is_a_container_fault(
    tmp_path: Path,
) -> None:
    class Broken(RecordingRuntime):
        async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
            raise RuntimeError(f"crashed holding {BASE_OAT}")

    app = create_app(
        make_config(tmp_path), runtime=Broken(), baseline={"CLAUDE_CODE_OAUTH_TOKEN": BASE_OAT}
    )
    with TestClient(app) as test_client:
        response = test_client.post("/api/task", json=task(), headers=AUTH)
    assert response.status_code == 503
    assert response.json()["error_code"] == "container_fault"
    assert BASE_OAT not in response.text


def test_turns_of_one_chat_session_run_one_at_a_time(tmp_path: Path) -> None:
    class Gated(RecordingRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Event()
            self.running = 0
            self.most_running = 0

        async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            try:
                await self.gate.wait()
                return await super().run(turn, env)
            finally:
                self.running -= 1

    runtime = Gated()
    app = create_app(make_config(tmp_path), runtime=runtime, baseline={})

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            first = asyncio.create_task(
                http.post("/api/chat", json=task(session_id="s"), headers=AUTH)
            )
            while runtime.running < 1:  # the first turn holds the session
                await asyncio.sleep(0)
            second = asyncio.create_task(
                http.post("/api/chat", json=task(session_id="s"), headers=AUTH)
            )
            # a third turn of the same session gives up after its own short timeout
            starved = await http.post(
                "/api/chat", json=task(session_id="s", timeout_seconds=0.2), headers=AUTH
            )
            other = asyncio.create_task(
                http.post("/api/chat", json=task(session_id="other"), headers=AUTH)
            )
            while runtime.running < 2:  # the other session is not held up
                await asyncio.sleep(0)
            runtime.gate.set()
            answers = await asyncio.gather(first, second, other)
            return [starved.status_code, *(a.status_code for a in answers)]

    async def bounded() -> list[int]:
        async with asyncio.timeout(20):
            return await scenario()

    assert asyncio.run(bounded()) == [504, 200, 200, 200]
    assert runtime.most_running == 2  # "s" and "other", never two of "s"
    assert len(runtime.calls) == 3
