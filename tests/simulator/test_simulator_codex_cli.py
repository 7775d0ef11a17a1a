"""The real Codex CLI against the simulator, in API-key mode (/v1/responses) and in
ChatGPT sign-in mode (/backend-api/codex/responses, /oauth/token)."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest

from agent_server.config import PACKAGE_DIR
from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.clis import QUIET, ProxyTrap, codex_cli, search_path
from trinity_contract.prices import OPENAI, TokenUsage, cost_usd

pytestmark = pytest.mark.e2e

CLI_TIMEOUT = 30.0
KEY = "sk-proj-codex-cli-key-0000-kkkk"
ACCOUNT = "acct-1"
USER = "user-1"
EMAIL = "codex-cli@example.invalid"
REFRESH = "rt-codex-cli-initial-0000"
REPLY = "Simulated reply: say hi"
TRIGGER = "codex-red-team-probe-7a2f"
CODEX_PACKAGE = PACKAGE_DIR / "codex_cli"


@pytest.fixture(scope="module")
def codex() -> str:
    """The CLI a Codex agent runs (``tests/clis.py``); missing, these tests fail."""
    return codex_cli()


@pytest.fixture(scope="module")
def proxy_trap() -> Iterator[ProxyTrap]:
    trap = ProxyTrap()
    yield trap
    trap.close()


def unsigned_jwt(payload: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}.c2ln"


def sign_in_claims(jti: str) -> dict[str, Any]:
    # chatgpt_user_id is not optional: the CLI compares user and account before and
    # after a refresh, and without a user every refresh reads as another person.
    return {
        "email": EMAIL,
        "exp": int(time.time()) + 3600,
        "jti": jti,
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "pro",
            "chatgpt_account_id": ACCOUNT,
            "chatgpt_user_id": USER,
        },
    }


ACCESS = unsigned_jwt(sign_in_claims("access-0"))


def api_key_config(base_url: str) -> str:
    return f"""model_provider = "sim"
model = "gpt-5.5-codex"
[model_providers.sim]
name = "sim"
base_url = "{base_url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
{QUIET}"""


def chatgpt_config(base_url: str) -> str:
    # The file store: the sign-in and its rotations stay in auth.json, not a keyring.
    return f"""model_provider = "simchat"
model = "gpt-5.5-codex"
cli_auth_credentials_store = "file"
chatgpt_base_url = "{base_url}/backend-api/"
[model_providers.simchat]
name = "simchat"
base_url = "{base_url}/backend-api/codex"
wire_api = "responses"
requires_openai_auth = true
supports_websockets = false
{QUIET}"""


def auth_json() -> dict[str, Any]:
    return {
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": unsigned_jwt(sign_in_claims("id-0")),
            "access_token": ACCESS,
            "refresh_token": REFRESH,
            "account_id": ACCOUNT,
        },
        "last_refresh": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }


@dataclass
class CodexRun:
    exit_code: int
    events: list[dict[str, Any]]
    home: Path
    seconds: float

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


class RunCodex(Protocol):
    def __call__(
        self, *, mode: str, prompt: str = "say hi", sandbox: str | None = None
    ) -> CodexRun: ...


@pytest.fixture
def run_codex(sim: SimulatorProcess, tmp_path: Path, codex: str, proxy_trap: ProxyTrap) -> RunCodex:
    def run(*, mode: str, prompt: str = "say hi", sandbox: str | None = None) -> CodexRun:
        home = tmp_path / "codex-home"
        home.mkdir(exist_ok=True)
        env = {
            "HOME": str(tmp_path),
            "PATH": search_path(),
            "CODEX_HOME": str(home),
            "CODEX_REFRESH_TOKEN_URL_OVERRIDE": f"{sim.base_url}/oauth/token",
            **{name: proxy_trap.url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")},
            "NO_PROXY": "127.0.0.1,localhost",
        }
        if mode == "api_key":
            env["OPENAI_API_KEY"] = KEY
            (home / "config.toml").write_text(api_key_config(sim.base_url))
        else:
            (home / "config.toml").write_text(chatgpt_config(sim.base_url))
            (home / "auth.json").write_text(json.dumps(auth_json()))
        started = time.monotonic()
        done = subprocess.run(
            [
                codex,
                "exec",
                "--json",
                "--skip-git-repo-check",
                *(["--sandbox", sandbox] if sandbox else []),
                prompt,
            ],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        assert lines, done.stderr
        assert proxy_trap.requests == [], (
            f"the CLI called past the simulator: {proxy_trap.requests}"
        )
        seconds = time.monotonic() - started
        return CodexRun(done.returncode, [json.loads(line) for line in lines], home, seconds)

    return run


def rollout_rate_limits(home: Path) -> dict[str, Any]:
    """The last rate-limit snapshot the CLI wrote to its session rollout."""
    snapshots = [
        event["payload"]["rate_limits"]
        for rollout in sorted(home.glob("sessions/**/rollout-*.jsonl"))
        for event in map(json.loads, rollout.read_text().splitlines())
        if event.get("payload", {}).get("type") == "token_count"
        and event["payload"].get("rate_limits")
    ]
    assert snapshots, "no rate limits in the session rollout"
    return dict(snapshots[-1])


def turns(control: SimulatorControl, path: str) -> list[tuple[str | None, int]]:
    return [(r["credential"], r["status"]) for r in control.requests() if r["path"] == path]


def assert_only_the_simulator_was_called(control: SimulatorControl) -> None:
    # The side calls a signed-in CLI makes (plugins, models, analytics) all came here.
    paths = {r["path"] for r in control.requests()}
    assert all(p.startswith(("/backend-api/", "/v1/", "/oauth/")) for p in paths), paths


@pytest.fixture
def signed_in(control: SimulatorControl) -> SimulatorControl:
    control.register(
        ACCESS,
        kind="codex",
        label="plan-a",
        account_id=ACCOUNT,
        user_id=USER,
        email=EMAIL,
        refresh_token=REFRESH,
        expires_in=3600,
    )
    return control


def test_the_cli_under_test_is_the_pinned_release(codex: str, tmp_path: Path) -> None:
    pinned = json.loads((CODEX_PACKAGE / "package.json").read_text())["dependencies"]
    done = subprocess.run(
        [codex, "--version"],
        env={"HOME": str(tmp_path), "PATH": search_path(), "CODEX_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=True,
    )
    assert done.stdout.split() == ["codex-cli", pinned["@openai/codex"]]


def test_an_api_key_turn_gets_the_reply_and_pays_for_it(
    control: SimulatorControl, run_codex: RunCodex
) -> None:
    control.register(KEY, kind="openai_key", label="platform", credit_usd=10)

    run = run_codex(mode="api_key")

    assert run.exit_code == 0
    assert [m["item"]["text"] for m in run.of_type("item.completed")] == [REPLY]
    usage = run.of_type("turn.completed")[0]["usage"]
    assert usage["output_tokens"] == len(REPLY) // 4
    (model,) = {r["model"] for r in control.requests() if r["path"] == "/v1/responses"}
    spent = cost_usd(
        OPENAI,
        str(model),
        TokenUsage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]),
    )
    assert control.credential("platform")["credit_usd"] == pytest.approx(10 - spent)
    assert turns(control, "/v1/responses") == [("platform", 200)]
    assert_only_the_simulator_was_called(control)
    assert run.seconds < 10


def test_a_signed_in_turn_gets_the_reply_on_the_plan(
    signed_in: SimulatorControl, run_codex: RunCodex
) -> None:
    run = run_codex(mode="chatgpt")

    assert run.exit_code == 0
    assert [m["item"]["text"] for m in run.of_type("item.completed")] == [REPLY]
    usage = run.of_type("turn.completed")[0]["usage"]
    windows = signed_in.credential("plan-a")["windows"]
    assert windows["five_hour"]["used"] == usage["input_tokens"] + usage["output_tokens"]
    assert turns(signed_in, "/backend-api/codex/responses") == [("plan-a", 200)]
    assert signed_in.credential("plan-a")["refreshes"] == 0
    assert_only_the_simulator_was_called(signed_in)
    assert run.seconds < 10
    # exec --json never prints rate limits; the session rollout keeps what the CLI
    # read from the x-codex-* headers.
    limits = rollout_rate_limits(run.home)
    assert limits["primary"]["window_minutes"] == 300
    assert limits["secondary"]["window_minutes"] == 10080
    five_hour = windows["five_hour"]
    assert limits["primary"]["used_percent"] == round(five_hour["utilization"] * 100, 2)
    assert five_hour["resets_at"] is not None
    reset = datetime.fromisoformat(five_hour["resets_at"]).timestamp()
    assert 0 <= limits["primary"]["resets_at"] - reset < 1


def test_an_exhausted_plan_fails_the_turn_after_one_429(
    signed_in: SimulatorControl, run_codex: RunCodex
) -> None:
    signed_in.set_usage(ACCESS, "five_hour", percent=100)

    run = run_codex(mode="chatgpt")

    assert run.exit_code == 1
    [failed] = run.of_type("turn.failed")
    # The typographic apostrophe is the CLI's own; the reset time follows.
    assert failed["error"]["message"].startswith("You’ve hit your usage limit."), failed
    assert "try again at" in failed["error"]["message"]
    assert turns(signed_in, "/backend-api/codex/responses") == [("plan-a", 429)]
    assert run.seconds < 10


def test_a_revoked_sign_in_fails_once_its_refresh_is_refused(
    signed_in: SimulatorControl, run_codex: RunCodex
) -> None:
    signed_in.revoke(ACCESS)

    run = run_codex(mode="chatgpt")

    assert run.exit_code == 1
    [failed] = run.of_type("turn.failed")
    assert "refresh token was revoked" in failed["error"]["message"], failed
    assert {s for _, s in turns(signed_in, "/backend-api/codex/responses")} == {401}
    assert turns(signed_in, "/oauth/token") == [("plan-a", 401)]
    assert signed_in.credential("plan-a")["refreshes"] == 0


def test_an_expired_access_token_is_refreshed_once_and_the_turn_served(
    signed_in: SimulatorControl, run_codex: RunCodex
) -> None:
    signed_in.expire_access(ACCESS)

    run = run_codex(mode="chatgpt")

    assert run.exit_code == 0
    assert [m["item"]["text"] for m in run.of_type("item.completed")] == [REPLY]
    assert signed_in.credential("plan-a")["refreshes"] == 1
    assert turns(signed_in, "/oauth/token") == [("plan-a", 200)]
    assert turns(signed_in, "/backend-api/codex/responses")[-1] == ("plan-a", 200)
    # The CLI kept the rotated pair: the spent refresh token is gone from auth.json.
    stored = json.loads((run.home / "auth.json").read_text())["tokens"]
    assert stored["refresh_token"] != REFRESH
    assert stored["access_token"] != ACCESS
    assert run.seconds < 10


def test_the_red_team_scripts_commands_run_in_the_cli_and_its_answer_quotes_them(
    control: SimulatorControl, run_codex: RunCodex, tmp_path: Path
) -> None:
    """The scripted tool-using model speaks the Responses API too: ``exec_command``
    calls the real CLI runs (its own sandbox off, as the agent server runs it where
    something else bounds it), then a final answer quoting what they returned."""
    control.register(KEY, kind="openai_key", label="platform", credit_usd=10)
    secret_file = tmp_path / "planted.txt"
    secret_file.write_text("planted-by-the-test")
    control.arm_red_team(
        trigger=TRIGGER, reads=[str(secret_file)], commands=["echo ran-$((6 * 7))"]
    )

    run = run_codex(mode="api_key", prompt=f"{TRIGGER}: look around", sandbox="danger-full-access")

    assert run.exit_code == 0, run.events
    script = control.red_team()
    results = [(r["tool"], (r["input"] or {}).get("cmd"), r["content"]) for r in script["results"]]
    assert [(tool, cmd) for tool, cmd, _ in results] == [
        ("exec_command", f"cat -- {secret_file}"),
        ("exec_command", "echo ran-$((6 * 7))"),
    ]
    assert "planted-by-the-test" in results[0][2] and "ran-42" in results[1][2], results
    answers = [m["item"]["text"] for m in run.of_type("item.completed") if "text" in m["item"]]
    assert answers and "ran-42" in answers[-1]
    assert turns(control, "/v1/responses") == [("platform", 200), ("platform", 200)]
