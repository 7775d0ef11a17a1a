"""Settings from the environment: loud failures and the CLI binary resolution order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_server.cgroups import Limits
from agent_server.config import (
    BUNDLED_CLAUDE_BIN,
    ConfigError,
    load_config,
    resolve_claude_bin,
    resolve_codex_bin,
)

REPO = Path(__file__).resolve().parents[2]


def env_for(home: Path, **changes: str) -> dict[str, str]:
    env = {"TRINITY_AGENT_SECRET": "s3cret-value", "TRINITY_AGENT_HOME": str(home)}
    env.update(changes)
    return env


def test_defaults(tmp_path: Path) -> None:
    config = load_config(env_for(tmp_path))
    assert config.runtime == "claude-code"
    assert config.model is None
    assert config.timeout_max is None
    assert config.boot_guard is True
    assert config.egress_guard is False
    assert config.home == tmp_path.resolve()
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"TRINITY_AGENT_SECRET": ""}, "TRINITY_AGENT_SECRET"),
        ({"TRINITY_AGENT_SECRET": "   "}, "TRINITY_AGENT_SECRET"),
        ({"TRINITY_AGENT_RUNTIME": "codex"}, "TRINITY_AGENT_RUNTIME"),
        ({"TRINITY_AGENT_RUNTIME": "anthropic-api"}, "TRINITY_AGENT_MODEL"),
        ({"TRINITY_AGENT_HOME": ""}, "TRINITY_AGENT_HOME"),
        ({"TRINITY_AGENT_HOME": "/nonexistent/agent/home"}, "TRINITY_AGENT_HOME"),
        ({"TRINITY_AGENT_TIMEOUT_MAX": "ten"}, "TRINITY_AGENT_TIMEOUT_MAX"),
        ({"TRINITY_AGENT_TIMEOUT_MAX": "0"}, "TRINITY_AGENT_TIMEOUT_MAX"),
        ({"TRINITY_AGENT_BOOT_GUARD": "maybe"}, "TRINITY_AGENT_BOOT_GUARD"),
        ({"TRINITY_AGENT_EGRESS_GUARD": "yes please"}, "TRINITY_AGENT_EGRESS_GUARD"),
        ({"TRINITY_AGENT_EGRESS_ALLOW": "10.0.0.0/8"}, "without TRINITY_AGENT_EGRESS_GUARD"),
        (
            {"TRINITY_AGENT_EGRESS_GUARD": "1", "TRINITY_AGENT_EGRESS_ALLOW": "10.0.0.1/8"},
            "TRINITY_AGENT_EGRESS_ALLOW: '10.0.0.1/8'",
        ),
        ({"TRINITY_AGENT_WORK_AREA": "relative/area"}, "TRINITY_AGENT_WORK_AREA"),
        ({"TRINITY_AGENT_CLI_CACHE": "relative/cache"}, "TRINITY_AGENT_CLI_CACHE"),
        ({"ANTHROPIC_BASE_URL": "ftp://example.invalid"}, "upstream base URL"),
        ({"TRINITY_ANTHROPIC_BASE_URL": "not a url"}, "upstream base URL"),
        ({"TRINITY_CODEX_BASE_URL": "chatgpt.com"}, "TRINITY_CODEX_BASE_URL"),
        ({"TRINITY_OPENAI_BASE_URL": "ftp://api.openai.com"}, "TRINITY_OPENAI_BASE_URL"),
    ],
)
def test_a_bad_setting_fails_loudly_naming_the_variable(
    tmp_path: Path, changes: dict[str, str], names: str
) -> None:
    with pytest.raises(ConfigError, match=names):
        load_config(env_for(tmp_path, **changes))


def test_the_cli_binary_resolves_env_then_bundled_then_path(tmp_path: Path) -> None:
    on_path = tmp_path / "claude"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert resolve_claude_bin({"TRINITY_CLAUDE_BIN": "/opt/claude"}) == "/opt/claude"
    if BUNDLED_CLAUDE_BIN.exists():
        assert resolve_claude_bin({"PATH": str(tmp_path)}) == str(BUNDLED_CLAUDE_BIN)
    else:
        assert resolve_claude_bin({"PATH": str(tmp_path)}) == str(on_path)


def test_the_bundled_cli_is_installed_where_the_server_looks() -> None:
    # `cd agent_server && npm ci` puts it here; the e2e tests run this binary.
    assert BUNDLED_CLAUDE_BIN.exists(), "run `cd agent_server && npm ci`"


def test_the_server_refuses_to_start_without_the_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRINITY_")}
    env.update(TRINITY_AGENT_HOME=str(tmp_path), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agent_server", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert "TRINITY_AGENT_SECRET is not set" in done.stderr
    assert "listening" not in done.stdout


def test_the_egress_guard_is_asked_for_by_its_own_variable(tmp_path: Path) -> None:
    assert load_config(env_for(tmp_path, TRINITY_AGENT_EGRESS_GUARD="1")).egress_guard is True
    assert load_config(env_for(tmp_path, TRINITY_AGENT_EGRESS_GUARD="0")).egress_guard is False
    allowed = load_config(
        env_for(tmp_path, TRINITY_AGENT_EGRESS_GUARD="1", TRINITY_AGENT_EGRESS_ALLOW="10.2.0.5:443")
    ).egress_allow
    assert [str(allowance) for allowance in allowed] == ["10.2.0.5/32:443"]


def test_the_upstream_is_the_servers_own_setting_trinitys_first(tmp_path: Path) -> None:
    assert load_config(env_for(tmp_path)).upstream == "https://api.anthropic.com"
    assert (
        load_config(env_for(tmp_path, ANTHROPIC_BASE_URL="http://127.0.0.1:9/")).upstream
        == "http://127.0.0.1:9"
    )
    both = env_for(
        tmp_path,
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        TRINITY_ANTHROPIC_BASE_URL="http://127.0.0.1:8",
    )
    assert load_config(both).upstream == "http://127.0.0.1:8"


def test_a_missing_agent_user_stops_a_root_boot_naming_the_fix(tmp_path: Path) -> None:
    env = env_for(tmp_path, TRINITY_AGENT_USER="no-such-agent-user-x")
    if os.geteuid() != 0:  # not root: no user to switch to, the weak mode
        assert load_config(env).agent_user is None
        return
    with pytest.raises(ConfigError, match="TRINITY_AGENT_USER.*make setup"):
        load_config(env)


def test_the_agent_user_follows_whether_the_server_runs_as_root(tmp_path: Path) -> None:
    config = load_config(env_for(tmp_path))
    if os.geteuid() == 0:
        assert config.agent_user is not None and config.agent_user.uid != 0
    else:
        assert config.agent_user is None


def test_the_sandbox_mode_and_limits_are_read_and_checked(tmp_path: Path) -> None:
    config = load_config(
        env_for(
            tmp_path,
            TRINITY_AGENT_SANDBOX="Required",
            TRINITY_AGENT_MEMORY_LIMIT="512m",
            TRINITY_AGENT_CPU_MILLICORES="1500",
            TRINITY_AGENT_PIDS_LIMIT="64",
        )
    )
    assert config.sandbox == "required"
    assert config.limits == Limits(memory_bytes=512 * 1024**2, cpu_millicores=1500, pids=64)
    assert load_config(env_for(tmp_path)).limits == Limits()  # unset: no limit
    assert load_config(env_for(tmp_path)).sandbox == "auto"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRINITY_AGENT_SANDBOX", "maybe"),
        ("TRINITY_AGENT_MEMORY_LIMIT", "lots"),
        ("TRINITY_AGENT_MEMORY_LIMIT", "0"),
        ("TRINITY_AGENT_CPU_MILLICORES", "-5"),
        ("TRINITY_AGENT_PIDS_LIMIT", "1.5"),
    ],
)
def test_a_bad_sandbox_setting_stops_the_boot_naming_it(
    tmp_path: Path, name: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=name):
        load_config(env_for(tmp_path, **{name: value}))


def test_allowed_tools_are_read_as_a_comma_separated_list(tmp_path: Path) -> None:
    config = load_config(env_for(tmp_path, TRINITY_AGENT_ALLOWED_TOOLS=" Read, Bash ,"))
    assert config.allowed_tools == ("Read", "Bash")
    assert load_config(env_for(tmp_path)).allowed_tools == ()


@pytest.mark.parametrize("value", ["Bash(rm:*)", "Read Bash", "--dangerously-skip-permissions"])
def test_an_allowed_tool_that_is_not_a_tool_name_is_refused_at_boot(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(ConfigError, match="TRINITY_AGENT_ALLOWED_TOOLS"):
        load_config(env_for(tmp_path, TRINITY_AGENT_ALLOWED_TOOLS=value))


def test_the_codex_runtime_defaults_to_the_real_providers_hosts(tmp_path: Path) -> None:
    config = load_config(env_for(tmp_path, TRINITY_AGENT_RUNTIME="codex-cli"))
    assert config.runtime == "codex-cli"
    assert config.codex_upstream == "https://chatgpt.com"
    assert config.openai_upstream == "https://api.openai.com"
    moved = load_config(
        env_for(
            tmp_path,
            TRINITY_CODEX_BASE_URL="http://127.0.0.1:8100/",
            TRINITY_OPENAI_BASE_URL="http://127.0.0.1:8101",
        )
    )
    assert (moved.codex_upstream, moved.openai_upstream) == (
        "http://127.0.0.1:8100",
        "http://127.0.0.1:8101",
    )


def test_the_codex_binary_is_the_pinned_native_one_unless_named() -> None:
    assert resolve_codex_bin({"TRINITY_CODEX_BIN": "/opt/codex"}) == "/opt/codex"
    found = resolve_codex_bin({"PATH": ""})
    # `make setup` installs it; the e2e tests run this binary and fail without it
    assert found.endswith("/bin/codex") and "codex_cli/node_modules" in found
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "codex-cli 0.169.0"


@pytest.mark.parametrize(("contained", "bounded"), [("1", True), ("0", False)])
def test_in_its_container_the_codex_clis_own_command_sandbox_is_off(
    tmp_path: Path, contained: str, bounded: bool
) -> None:
    """The agent image sets TRINITY_AGENT_CONTAINED: the container bounds what the
    Codex CLI runs (its own sandbox cannot make its namespaces there). On a host with
    no sandbox of the server's, the CLI keeps its own."""
    from datetime import UTC, datetime

    from agent_server.app import build_runtime
    from agent_server.confinement import Confinement
    from agent_server.runtimes.codex_cli import CodexCliRuntime

    config = load_config(
        env_for(tmp_path, TRINITY_AGENT_RUNTIME="codex-cli", TRINITY_AGENT_CONTAINED=contained)
    )
    runtime = build_runtime(
        config,
        lambda: datetime.now(UTC),
        binary="codex",
        confinement=Confinement(isolation="separate-user"),
    )
    assert isinstance(runtime, CodexCliRuntime) and runtime.bounded is bounded


def test_the_agent_image_says_its_server_is_contained() -> None:
    dockerfile = (Path(__file__).resolve().parents[2] / "deploy" / "Dockerfile.agent").read_text()
    assert "TRINITY_AGENT_CONTAINED=1" in dockerfile
