"""The real Claude Code CLI against the simulator: what it reports for each answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_server.classifier import classify_runtime_refusal
from agent_server.config import PACKAGE_DIR
from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from simulator.state import model_family
from tests.clis import claude_cli

pytestmark = pytest.mark.e2e

CLI_TIMEOUT = 60.0
OAUTH = "sk-ant-oat01-cli-plan-0000-aaaa"
API_KEY = "sk-ant-api03-cli-key-0000-kkkk"


@pytest.fixture(scope="module")
def claude() -> str:
    """The CLI the agent server would spawn (``tests/clis.py``); missing, these tests
    fail."""
    return claude_cli()


@dataclass
class CliRun:
    exit_code: int
    result: dict[str, Any]
    seconds: float


@pytest.fixture
def run_cli(sim: SimulatorProcess, tmp_path: Path, claude: str) -> Any:
    def run(
        *, oauth_token: str | None = None, api_key: str | None = None, args: tuple[str, ...] = ()
    ) -> CliRun:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        node = shutil.which("node")
        path = os.pathsep.join(
            p
            for p in (os.path.dirname(node) if node else None, "/usr/local/bin", "/usr/bin", "/bin")
            if p
        )
        env = {
            "HOME": str(home),
            "PATH": path,
            "ANTHROPIC_BASE_URL": sim.base_url,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        if oauth_token:
            env["CLAUDE_CODE_OAUTH_TOKEN"] = oauth_token
        if api_key:
            env["ANTHROPIC_API_KEY"] = api_key
        started = time.monotonic()
        done = subprocess.run(
            [claude, "-p", "say hi", "--output-format", "json", *args],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
        )
        seconds = time.monotonic() - started
        assert done.stdout.strip(), done.stderr
        return CliRun(done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), seconds)

    return run


def pinned_version() -> str:
    package = json.loads((PACKAGE_DIR / "package.json").read_text())
    return str(package["dependencies"]["@anthropic-ai/claude-code"])


def test_the_cli_under_test_is_the_pinned_release(claude: str, tmp_path: Path) -> None:
    # What this file asserts is how the pinned CLI behaves; another version's
    # behaviour proves nothing about the one agents run.
    done = subprocess.run(
        [claude, "--version"],
        env={"HOME": str(tmp_path), "PATH": os.defpath, "DISABLE_AUTOUPDATER": "1"},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=True,
    )
    assert done.stdout.split()[0] == pinned_version()


def message_requests(control: SimulatorControl) -> list[dict[str, Any]]:
    return [dict(r) for r in control.requests() if r["path"] == "/v1/messages"]


def test_the_cli_gets_the_reply_on_a_plan_token(control: SimulatorControl, run_cli: Any) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    run = run_cli(oauth_token=OAUTH)

    assert run.exit_code == 0
    assert run.result["is_error"] is False
    assert run.result["result"] == "Simulated reply: say hi"
    assert run.result["usage"]["output_tokens"] == len("Simulated reply: say hi") // 4
    served = message_requests(control)
    assert [(r["auth_kind"], r["credential"], r["status"], r["stream"]) for r in served] == [
        ("oauth", "plan-a", 200, True)
    ]
    assert model_family(served[0]["model"]) == "sonnet"
    assert control.credential("plan-a")["windows"]["five_hour"]["used"] > 0


def test_the_cli_reports_a_usage_limit_after_one_request(
    control: SimulatorControl, run_cli: Any
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=100)

    run = run_cli(oauth_token=OAUTH)

    assert run.exit_code == 1
    assert run.result["is_error"] is True
    assert run.result["api_error_status"] == 429
    assert run.result["result"].startswith("You've hit your")
    assert "resets" in run.result["result"]
    assert [r["status"] for r in message_requests(control)] == [429]
    assert run.seconds < 30


def test_the_cli_sends_its_default_model_for_each_credential(
    control: SimulatorControl, run_cli: Any
) -> None:
    # The default moves between releases (2.1.197: claude-sonnet-5 / claude-opus-4-8);
    # the simulator must know it, or every turn without a model is a 404.
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.register(API_KEY, kind="api_key", label="platform-key")

    assert run_cli(oauth_token=OAUTH).exit_code == 0
    assert run_cli(api_key=API_KEY).exit_code == 0

    assert [(r["auth_kind"], r["model"]) for r in message_requests(control)] == [
        ("oauth", "claude-sonnet-5-5"),
        ("api_key", "claude-opus-5-5"),
    ]


@pytest.mark.parametrize("window", ["five_hour", "seven_day"])
def test_the_usage_limit_sentence_alone_says_limit_and_reset(
    control: SimulatorControl, run_cli: Any, window: str
) -> None:
    # The classifier falls back to the sentence when a refusal carries no status; the
    # sentence is UI copy, so it is checked against the pinned CLI's own words.
    control.register(OAUTH, kind="oauth", label="plan-a")
    view = control.set_usage(OAUTH, window, percent=100)  # type: ignore[arg-type]
    resets_at = view["windows"][window]["resets_at"]
    assert resets_at is not None

    run = run_cli(oauth_token=OAUTH)
    refusal = classify_runtime_refusal(
        api_error_status=None, text=run.result["result"], now=datetime.now(UTC)
    )

    assert refusal.error_code == "rate_limit", run.result["result"]
    assert refusal.resets_at is not None, run.result["result"]
    # The reset header carries whole seconds rounded up and the CLI prints the minute,
    # so the sentence's reset lies within a second after, or a minute before, the truth.
    trail = datetime.fromisoformat(resets_at) - refusal.resets_at
    assert -timedelta(seconds=1) < trail < timedelta(minutes=1)


def test_the_cli_reports_401_for_a_revoked_token(control: SimulatorControl, run_cli: Any) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.revoke(OAUTH)

    run = run_cli(oauth_token=OAUTH)

    assert run.exit_code == 1
    assert run.result["api_error_status"] == 401
    assert "OAuth token has been revoked" in run.result["result"]
    assert {r["status"] for r in message_requests(control)} == {401}


def test_the_cli_reports_400_for_a_key_without_credit(
    control: SimulatorControl, run_cli: Any
) -> None:
    control.register(API_KEY, kind="api_key", label="platform-key", credit_usd=0)

    run = run_cli(api_key=API_KEY)

    assert run.exit_code == 1
    assert run.result["api_error_status"] == 400
    assert "Credit balance is too low" in run.result["result"]
    assert [(r["auth_kind"], r["credential"]) for r in message_requests(control)] == [
        ("api_key", "platform-key")
    ]


def test_the_cli_reports_404_for_an_unknown_model(control: SimulatorControl, run_cli: Any) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    run = run_cli(oauth_token=OAUTH, args=("--model", "claude-imaginary-9"))

    assert run.exit_code == 1
    assert run.result["api_error_status"] == 404
    assert "claude-imaginary-9" in run.result["result"]
    assert {r["model"] for r in message_requests(control)} == {"claude-imaginary-9"}
