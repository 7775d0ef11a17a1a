"""Env layering table, `.env` parsing and the boot guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_server.config import AgentConfig
from agent_server.contract import AppliedOverride
from agent_server.envlayer import FIXED_ENV, layer_env, override_layers, parse_dotenv
from agent_server.state import AgentState
from trinity_contract.redaction import Redactor

OAT = "sk-ant-oat01-baseline"
KEY = "sk-ant-api03-baseline"


def layered(
    *,
    baseline: dict[str, str] | None = None,
    dotenv: dict[str, str] | None = None,
    overrides: dict[str, str | None] | None = None,
    override: AppliedOverride | None = None,
) -> dict[str, str]:
    extra, drop = override_layers(override)
    return layer_env(
        baseline=baseline or {},
        dotenv=dotenv or {},
        runtime_overrides=overrides or {},
        extra=extra,
        drop=drop,
        home="/agent/.trinity/spawns/x",
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # baseline passes through
        ({"baseline": {"CLAUDE_CODE_OAUTH_TOKEN": OAT}}, {"CLAUDE_CODE_OAUTH_TOKEN": OAT}),
        # a key in the .env no longer shadows the baseline subscription: refused
        (
            {"baseline": {"CLAUDE_CODE_OAUTH_TOKEN": OAT}, "dotenv": {"ANTHROPIC_API_KEY": KEY}},
            {"CLAUDE_CODE_OAUTH_TOKEN": OAT, "ANTHROPIC_API_KEY": None},
        ),
        # an allowed .env name beats the baseline
        ({"baseline": {"AGENT_X": "base"}, "dotenv": {"AGENT_X": "dotenv"}}, {"AGENT_X": "dotenv"}),
        # protected names in .env are skipped
        (
            {
                "baseline": {"PATH": "/usr/bin"},
                "dotenv": {"PATH": "/evil", "HOME": "/evil", "TRINITY_AGENT_RUNTIME": "x"},
            },
            {"PATH": "/usr/bin", "HOME": "/agent/.trinity/spawns/x", "TRINITY_AGENT_RUNTIME": None},
        ),
        # runtime overrides beat .env; None unsets
        (
            {
                "baseline": {"CLAUDE_CODE_OAUTH_TOKEN": OAT},
                "dotenv": {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_AUTH_TOKEN": "bearer-x"},
                "overrides": {
                    "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-reloaded",
                    "ANTHROPIC_API_KEY": None,
                    "ANTHROPIC_AUTH_TOKEN": None,
                },
            },
            {
                "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-reloaded",
                "ANTHROPIC_API_KEY": None,
                "ANTHROPIC_AUTH_TOKEN": None,
            },
        ),
        # an oauth override sets the token and drops both API-key names
        (
            {
                "baseline": {"ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_OAUTH_TOKEN": OAT},
                "dotenv": {"ANTHROPIC_AUTH_TOKEN": "bearer-x"},
                "override": AppliedOverride("oauth_token", "sk-ant-oat01-override"),
            },
            {
                "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-override",
                "ANTHROPIC_API_KEY": None,
                "ANTHROPIC_AUTH_TOKEN": None,
            },
        ),
        # an api_key override beats a force-unset and drops the OAuth token
        (
            {
                "baseline": {"CLAUDE_CODE_OAUTH_TOKEN": OAT},
                "overrides": {"ANTHROPIC_API_KEY": None},
                "override": AppliedOverride("api_key", "sk-ant-api03-override"),
            },
            {
                "ANTHROPIC_API_KEY": "sk-ant-api03-override",
                "CLAUDE_CODE_OAUTH_TOKEN": None,
                "ANTHROPIC_AUTH_TOKEN": None,
            },
        ),
        # the fixed flags cannot be turned off by any layer
        (
            {
                "baseline": {"DISABLE_TELEMETRY": "0"},
                "dotenv": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "0"},
            },
            dict(FIXED_ENV),
        ),
        # the CLI gives up on a throttle after two retries unless a layer says otherwise
        ({}, {"CLAUDE_CODE_MAX_RETRIES": "2"}),
        ({"baseline": {"CLAUDE_CODE_MAX_RETRIES": "5"}}, {"CLAUDE_CODE_MAX_RETRIES": "5"}),
        ({"dotenv": {"CLAUDE_CODE_MAX_RETRIES": "0"}}, {"CLAUDE_CODE_MAX_RETRIES": "0"}),
        # the server's shared secret never reaches the child
        ({"baseline": {"TRINITY_AGENT_SECRET": "s3cret"}}, {"TRINITY_AGENT_SECRET": None}),
        # HOME is always the per-spawn one
        ({"baseline": {"HOME": "/root"}}, {"HOME": "/agent/.trinity/spawns/x"}),
    ],
)
def test_it_layers_the_spawn_environment(
    case: dict[str, Any], expected: dict[str, str | None]
) -> None:
    env = layered(**case)
    for name, value in expected.items():
        if value is None:
            assert name not in env
        else:
            assert env[name] == value


def test_layering_changes_none_of_its_inputs() -> None:
    baseline = {"ANTHROPIC_API_KEY": KEY}
    overrides: dict[str, str | None] = {"ANTHROPIC_API_KEY": None}
    layer_env(
        baseline=baseline,
        dotenv={},
        runtime_overrides=overrides,
        extra={},
        drop=["X"],
        home="/h",
    )
    assert baseline == {"ANTHROPIC_API_KEY": KEY}
    assert overrides == {"ANTHROPIC_API_KEY": None}


def test_it_parses_a_dotenv_file() -> None:
    text = """
# a comment
export ANTHROPIC_API_KEY=sk-ant-api03-abc
QUOTED="hello world"
SINGLE='x=y'
TRAILING=value # comment
not an assignment
EMPTY=
"""
    assert parse_dotenv(text) == {
        "ANTHROPIC_API_KEY": "sk-ant-api03-abc",
        "QUOTED": "hello world",
        "SINGLE": "x=y",
        "TRAILING": "value",
        "EMPTY": "",
    }


def config_for(home: Path, *, runtime: str = "claude-code", boot_guard: bool = True) -> AgentConfig:
    return AgentConfig(
        secret="s3cret-value",
        runtime=runtime,  # type: ignore[arg-type]
        model=None,
        home=home,
        timeout_max=None,
        claude_bin="claude",
        boot_guard=boot_guard,
    )


@pytest.mark.parametrize(
    ("runtime", "boot_guard", "baseline", "armed"),
    [
        ("claude-code", True, {"CLAUDE_CODE_OAUTH_TOKEN": OAT}, True),
        ("claude-code", False, {"CLAUDE_CODE_OAUTH_TOKEN": OAT}, False),
        ("claude-code", True, {"ANTHROPIC_API_KEY": KEY}, False),
        ("claude-code", True, {}, False),
        ("anthropic-api", True, {"CLAUDE_CODE_OAUTH_TOKEN": OAT}, False),
    ],
)
def test_the_boot_guard_arms_only_for_a_baseline_subscription_on_claude_code(
    tmp_path: Path, runtime: str, boot_guard: bool, baseline: dict[str, str], armed: bool
) -> None:
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={KEY}-stale\n")
    state = AgentState(
        config_for(tmp_path, runtime=runtime, boot_guard=boot_guard),
        baseline=baseline,
        redactor=Redactor(),
    )
    env = state.spawn_env(None, tmp_path / "home")
    assert state.boot_guard_armed is armed
    # The stale .env key never reaches a spawn (the allowlist refuses it); an armed
    # guard also unsets a baseline key.
    assert env.get("ANTHROPIC_API_KEY") == (None if armed else baseline.get("ANTHROPIC_API_KEY"))


def test_reload_token_applies_to_the_next_spawn_and_reports_the_shadow(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={KEY}\nOTHER=1\n")
    state = AgentState(config_for(tmp_path), baseline={}, redactor=Redactor())
    before = state.spawn_env(None, tmp_path / "h")
    shadow = state.reload_token("sk-ant-oat01-reloaded-token", remove_api_key=False)
    kept_key = state.spawn_env(None, tmp_path / "h")
    shadow_removed = state.reload_token("sk-ant-oat01-reloaded-token2", remove_api_key=True)
    after = state.spawn_env(None, tmp_path / "h")

    assert "CLAUDE_CODE_OAUTH_TOKEN" not in before
    assert shadow == ["ANTHROPIC_API_KEY"]
    assert kept_key["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-reloaded-token"
    assert "ANTHROPIC_API_KEY" not in kept_key  # the .env may not set a credential
    # names only, and still reported: the .env file itself is unchanged
    assert shadow_removed == ["ANTHROPIC_API_KEY"]
    assert after["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-reloaded-token2"
    assert "ANTHROPIC_API_KEY" not in after
    # in memory only: no file anywhere holds it
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"reloaded" in p.read_bytes()]


def test_the_dotenv_is_reread_for_every_spawn(tmp_path: Path) -> None:
    state = AgentState(config_for(tmp_path, boot_guard=False), baseline={}, redactor=Redactor())
    (tmp_path / ".env").write_text("AGENT_MODE=one\n")
    first = state.spawn_env(None, tmp_path / "h")
    (tmp_path / ".env").write_text("AGENT_MODE=two\n")
    second = state.spawn_env(None, tmp_path / "h")
    assert (first["AGENT_MODE"], second["AGENT_MODE"]) == ("one", "two")


# Names a tool that writes the agent's `.env` could use to move where the next spawn's
# requests go (and, with them, every override credential), what code it loads, or which
# credential it sends. None of them may come from the `.env`; the baseline keeps its own.
REFUSED_FROM_DOTENV = [
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "OPENAI_BASE_URL",
    "ANY_OTHER_BASE_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "NO_PROXY",
    "no_proxy",
    "NODE_OPTIONS",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NODE_PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "BASH_ENV",
    "ENV",
    "SHELL",
    "SSL_CERT_FILE",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CONFIG_DIR",
    "GIT_SSH_COMMAND",
    "PATH",
    "HOME",
    "TRINITY_AGENT_SECRET",
    "TRINITY_AGENT_RUNTIME",
    "SOMETHING_NOBODY_LISTED",
]

ALLOWED_FROM_DOTENV = [
    "CLAUDE_CODE_MAX_RETRIES",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "MAX_THINKING_TOKENS",
    "BASH_DEFAULT_TIMEOUT_MS",
    "NO_COLOR",
    "AGENT_MODE",
    "AGENT_GITHUB_ORG",
]


@pytest.mark.parametrize("name", REFUSED_FROM_DOTENV)
def test_a_dotenv_cannot_set_a_name_outside_the_allowlist(name: str) -> None:
    env = layered(baseline={"PATH": "/usr/bin"}, dotenv={name: "http://attacker.invalid:1"})
    assert env.get(name) != "http://attacker.invalid:1"


@pytest.mark.parametrize("name", ALLOWED_FROM_DOTENV)
def test_a_dotenv_sets_a_name_on_the_allowlist(name: str) -> None:
    assert layered(dotenv={name: "7"})[name] == "7"


def test_a_refused_dotenv_name_leaves_the_baseline_value_in_place() -> None:
    base = "http://127.0.0.1:9/provider"
    env = layered(
        baseline={"ANTHROPIC_BASE_URL": base}, dotenv={"ANTHROPIC_BASE_URL": "http://evil"}
    )
    assert env["ANTHROPIC_BASE_URL"] == base


def test_each_refused_name_is_logged_once_per_spawn_without_its_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="agent_server.envlayer")
    layered(
        dotenv={
            "ANTHROPIC_BASE_URL": "http://attacker.invalid/secret-path",
            "LD_PRELOAD": "/tmp/x.so",  # noqa: S108 - a value, never opened
            "AGENT_MODE": "fine",
        }
    )
    refusals = [r.getMessage() for r in caplog.records]
    assert len(refusals) == 1
    assert "ANTHROPIC_BASE_URL" in refusals[0] and "LD_PRELOAD" in refusals[0]
    assert "AGENT_MODE" not in refusals[0]
    assert "attacker" not in refusals[0] and "x.so" not in refusals[0]
