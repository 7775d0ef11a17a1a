"""The agent server's settings, read once from the environment. Bad values fail loudly."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, cast
from urllib.parse import urlsplit

from agent_server.cgroups import LimitError, Limits, parse_memory
from agent_server.isolation import (
    DEFAULT_AGENT_USER,
    AgentUser,
    IsolationError,
    resolve_agent_user,
)
from trinity_contract.egress import VARIABLE as EGRESS_ALLOW
from trinity_contract.egress import EgressAllowance, egress_allow_parse

RuntimeName = Literal["claude-code", "anthropic-api", "codex-cli"]
RUNTIMES: Final = ("claude-code", "anthropic-api", "codex-cli")
SandboxMode = Literal["auto", "off", "required"]
SANDBOX_MODES: Final = ("auto", "off", "required")

PACKAGE_DIR: Final = Path(__file__).resolve().parent
# Installed from agent_server/package.json (`npm ci` in agent_server/).
BUNDLED_CLAUDE_BIN: Final = PACKAGE_DIR / "node_modules" / ".bin" / "claude"
# Installed from agent_server/codex_cli/package.json. The npm entry point is a node
# script that finds and execs the native binary beside it; the server runs that
# binary itself: one native process (like the Claude CLI's), and one file that can
# be staged for the agent user (the script resolves its binary relative to itself).
CODEX_CLI_MODULES: Final = PACKAGE_DIR / "codex_cli" / "node_modules"
BUNDLED_CODEX_SCRIPT: Final = CODEX_CLI_MODULES / ".bin" / "codex"
_CODEX_TARGETS: Final = {
    ("linux", "x86_64"): ("linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "aarch64"): ("linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x86_64"): ("darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("darwin-arm64", "aarch64-apple-darwin"),
}
DEFAULT_UPSTREAM: Final = "https://api.anthropic.com"
DEFAULT_CODEX_UPSTREAM: Final = "https://chatgpt.com"
DEFAULT_OPENAI_UPSTREAM: Final = "https://api.openai.com"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(Exception):
    """A missing or malformed setting; the message names the variable."""


@dataclass(frozen=True)
class AgentConfig:
    secret: str = field(repr=False)
    runtime: RuntimeName
    model: str | None
    home: Path
    timeout_max: float | None
    claude_bin: str
    boot_guard: bool
    # How the server logs (LOG_FORMAT: plain or json) and the agent it serves (its JSON
    # lines carry the name).
    log_format: str = "plain"
    agent_name: str = ""
    # Where the forwarder sends the CLI's requests: the server's own configuration
    # (TRINITY_ANTHROPIC_BASE_URL, else ANTHROPIC_BASE_URL), never the agent's `.env`.
    upstream: str = DEFAULT_UPSTREAM
    # The Codex upstreams, likewise the server's own: the ChatGPT backend a plan's
    # token is spent on (TRINITY_CODEX_BASE_URL) and the platform API an OpenAI key
    # is (TRINITY_OPENAI_BASE_URL).
    codex_upstream: str = DEFAULT_CODEX_UPSTREAM
    openai_upstream: str = DEFAULT_OPENAI_UPSTREAM
    # The Codex CLI (TRINITY_CODEX_BIN, else the bundled native binary).
    codex_bin: str = "codex"
    # The agent user's area (agent_server/isolation.py); None: a private temporary one.
    work_area: Path | None = None
    # Set when the server runs as root: the CLI runs as this user.
    agent_user: AgentUser | None = None
    # Where the CLI binary is staged for the agent user (separate-user mode only).
    cli_cache: Path | None = None
    # CLI tools the turns may run without approval (TRINITY_AGENT_ALLOWED_TOOLS,
    # comma-separated); empty: the CLI's default.
    allowed_tools: tuple[str, ...] = ()
    # TRINITY_AGENT_SANDBOX: auto (the sandbox where the host can run it), off, or
    # required (refuse to start without it). agent_server/confinement.py decides.
    sandbox: SandboxMode = "auto"
    # What the agent's sandboxed turns may use together (TRINITY_AGENT_MEMORY_LIMIT,
    # TRINITY_AGENT_CPU_MILLICORES, TRINITY_AGENT_PIDS_LIMIT); unset: no limit.
    limits: Limits = field(default_factory=Limits)
    # TRINITY_AGENT_EGRESS_GUARD: install the egress guard at boot, or refuse to start
    # (agent_server/egress.py; the server's main does it, before it listens).
    egress_guard: bool = False
    # TRINITY_AGENT_EGRESS_ALLOW: private IPv4 destinations the guard lets the agent
    # user reach (trinity_contract/egress.py); only with the guard.
    egress_allow: tuple[EgressAllowance, ...] = ()
    # TRINITY_AGENT_CONTAINED (the agent image sets it): the server runs in a container
    # of its own, which is the boundary of everything the CLI runs, as its sandbox is
    # on a host; the Codex CLI's own command sandbox, which needs user namespaces the
    # container's seccomp profile refuses, is then off (agent_server/runtimes/codex_home.py).
    contained: bool = False

    @property
    def dotenv_path(self) -> Path:
        return self.home / ".env"

    @property
    def legacy_token_files(self) -> list[Path]:
        """Where servers before the forwarder kept a reloaded token (removed at boot)."""
        state = self.home / ".trinity"
        return [state / "oauth_token", *state.glob(".oauth_token.*.tmp")]


LOG_FORMATS = ("plain", "json")
# A tool name, never a permission rule such as `Bash(rm:*)`: the platform validates the
# names it sends; this refuses anything else reaching the CLI's argv.
_TOOL_NAME: Final = re.compile(r"[A-Z][A-Za-z]{1,39}")


def resolve_claude_bin(environ: Mapping[str, str]) -> str:
    """TRINITY_CLAUDE_BIN, else the bundled `node_modules/.bin/claude`, else `claude` on PATH.

    Returns a path or the bare name `claude`; a missing binary is reported per turn
    as a container fault, not at boot, so /health stays reachable for diagnosis.
    """
    explicit = environ.get("TRINITY_CLAUDE_BIN", "").strip()
    if explicit:
        return explicit
    if BUNDLED_CLAUDE_BIN.exists():
        return str(BUNDLED_CLAUDE_BIN)
    return shutil.which("claude", path=environ.get("PATH")) or "claude"


def resolve_codex_bin(environ: Mapping[str, str]) -> str:
    """TRINITY_CODEX_BIN, else the bundled native Codex binary for this platform, else
    the bundled npm script, else `codex` on PATH (a missing one is reported per turn)."""
    explicit = environ.get("TRINITY_CODEX_BIN", "").strip()
    if explicit:
        return explicit
    target = _CODEX_TARGETS.get((os.uname().sysname.lower(), os.uname().machine))
    if target is not None:
        package, triple = target
        native = CODEX_CLI_MODULES / "@openai" / f"codex-{package}" / "vendor" / triple
        if (native / "bin" / "codex").exists():
            return str(native / "bin" / "codex")
    if BUNDLED_CODEX_SCRIPT.exists():
        return str(BUNDLED_CODEX_SCRIPT)
    return shutil.which("codex", path=environ.get("PATH")) or "codex"


def load_config(environ: Mapping[str, str] | None = None) -> AgentConfig:
    """Build the config from `environ` (default: os.environ). Raises ConfigError."""
    env = os.environ if environ is None else environ
    secret = env.get("TRINITY_AGENT_SECRET", "")
    if not secret.strip():
        raise ConfigError(
            "TRINITY_AGENT_SECRET is not set: the agent server refuses to start without "
            "the shared secret its callers must present as `Authorization: Bearer ...`"
        )
    runtime, model = _runtime_and_model(env)
    boot_guard = _boolean(env, "TRINITY_AGENT_BOOT_GUARD", "1")
    egress_guard = _boolean(env, "TRINITY_AGENT_EGRESS_GUARD", "0")
    log_format = env.get("LOG_FORMAT", "plain").strip().lower() or "plain"
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"LOG_FORMAT={log_format!r} is not 'plain' or 'json'")
    return AgentConfig(
        secret=secret,
        runtime=runtime,
        model=model,
        home=_home(env),
        timeout_max=_timeout_max(env),
        claude_bin=resolve_claude_bin(env),
        boot_guard=boot_guard,
        log_format=log_format,
        agent_name=env.get("TRINITY_AGENT_NAME", "").strip(),
        upstream=_upstream(env),
        codex_upstream=_base_url(env, "TRINITY_CODEX_BASE_URL", DEFAULT_CODEX_UPSTREAM),
        openai_upstream=_base_url(env, "TRINITY_OPENAI_BASE_URL", DEFAULT_OPENAI_UPSTREAM),
        codex_bin=resolve_codex_bin(env),
        work_area=_absolute_path(env, "TRINITY_AGENT_WORK_AREA"),
        agent_user=_agent_user(env),
        cli_cache=_absolute_path(env, "TRINITY_AGENT_CLI_CACHE"),
        allowed_tools=_allowed_tools(env),
        sandbox=_sandbox_mode(env),
        limits=_limits(env),
        egress_guard=egress_guard,
        egress_allow=_egress_allow(env, egress_guard),
        contained=_boolean(env, "TRINITY_AGENT_CONTAINED", "0"),
    )


def _egress_allow(env: Mapping[str, str], guard: bool) -> tuple[EgressAllowance, ...]:
    try:
        allowed = egress_allow_parse(env.get(EGRESS_ALLOW, ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if allowed and not guard:
        raise ConfigError(f"{EGRESS_ALLOW} is set without TRINITY_AGENT_EGRESS_GUARD=1")
    return allowed


def _boolean(env: Mapping[str, str], name: str, default: str) -> bool:
    raw = env.get(name, default).strip().lower()
    if raw not in _TRUE | _FALSE:
        raise ConfigError(f"{name}={raw!r} is not a boolean (1/0)")
    return raw in _TRUE


def _runtime_and_model(env: Mapping[str, str]) -> tuple[RuntimeName, str | None]:
    runtime = env.get("TRINITY_AGENT_RUNTIME", "claude-code").strip() or "claude-code"
    if runtime not in RUNTIMES:
        raise ConfigError(f"TRINITY_AGENT_RUNTIME={runtime!r} is not one of {', '.join(RUNTIMES)}")
    model = env.get("TRINITY_AGENT_MODEL", "").strip() or None
    if runtime == "anthropic-api" and model is None:
        raise ConfigError(
            "TRINITY_AGENT_MODEL is required with TRINITY_AGENT_RUNTIME=anthropic-api "
            "(the Messages API has no default model)"
        )
    return cast(RuntimeName, runtime), model


def _home(env: Mapping[str, str]) -> Path:
    home_raw = env.get("TRINITY_AGENT_HOME", "").strip()
    if not home_raw:
        raise ConfigError("TRINITY_AGENT_HOME is not set: it must name the agent's working dir")
    home = Path(home_raw).expanduser()
    if not home.is_dir():
        raise ConfigError(f"TRINITY_AGENT_HOME={home_raw!r} is not an existing directory")
    return home.resolve()


def _timeout_max(env: Mapping[str, str]) -> float | None:
    raw_timeout = env.get("TRINITY_AGENT_TIMEOUT_MAX", "").strip()
    if not raw_timeout:
        return None
    try:
        timeout_max = float(raw_timeout)
    except ValueError:
        raise ConfigError(
            f"TRINITY_AGENT_TIMEOUT_MAX={raw_timeout!r} is not a number of seconds"
        ) from None
    if timeout_max <= 0:
        raise ConfigError(f"TRINITY_AGENT_TIMEOUT_MAX={raw_timeout!r} must be positive")
    return timeout_max


def _upstream(env: Mapping[str, str]) -> str:
    """Where the forwarder sends the CLI's requests: the server's own setting."""
    upstream = (
        env.get("TRINITY_ANTHROPIC_BASE_URL", "").strip()
        or env.get("ANTHROPIC_BASE_URL", "").strip()
        or DEFAULT_UPSTREAM
    )
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"the upstream base URL {upstream!r} is not an http(s) URL")
    return upstream.rstrip("/")


def _base_url(env: Mapping[str, str], name: str, default: str) -> str:
    url = env.get(name, "").strip() or default
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{name}={url!r} is not an http(s) URL")
    return url.rstrip("/")


def _absolute_path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute():
        raise ConfigError(f"{name}={raw!r} is not an absolute path")
    return path


def _agent_user(env: Mapping[str, str]) -> AgentUser | None:
    """The CLI's own OS user when this server runs as root; None: the weak mode."""
    if os.geteuid() != 0:
        return None
    name = env.get("TRINITY_AGENT_USER", "").strip() or DEFAULT_AGENT_USER
    try:
        return resolve_agent_user(name)
    except IsolationError as exc:
        raise ConfigError(f"TRINITY_AGENT_USER: {exc}") from None


def _allowed_tools(env: Mapping[str, str]) -> tuple[str, ...]:
    allowed_tools = tuple(
        name.strip()
        for name in env.get("TRINITY_AGENT_ALLOWED_TOOLS", "").split(",")
        if name.strip()
    )
    for name in allowed_tools:
        if not _TOOL_NAME.fullmatch(name):
            raise ConfigError(
                f"TRINITY_AGENT_ALLOWED_TOOLS: {name!r} is not a CLI tool name (letters only)"
            )
    return allowed_tools


def _sandbox_mode(env: Mapping[str, str]) -> SandboxMode:
    mode = env.get("TRINITY_AGENT_SANDBOX", "auto").strip().lower() or "auto"
    if mode not in SANDBOX_MODES:
        choices = ", ".join(SANDBOX_MODES)
        raise ConfigError(f"TRINITY_AGENT_SANDBOX={mode!r} is not one of {choices}")
    return cast(SandboxMode, mode)


def _limits(env: Mapping[str, str]) -> Limits:
    """The sandbox's limits, as the Docker runtime's settings name them."""
    memory = env.get("TRINITY_AGENT_MEMORY_LIMIT", "").strip()
    try:
        memory_bytes = parse_memory(memory) if memory else None
    except LimitError as exc:
        raise ConfigError(f"TRINITY_AGENT_MEMORY_LIMIT: {exc}") from None
    return Limits(
        memory_bytes=memory_bytes,
        cpu_millicores=_positive_int(env, "TRINITY_AGENT_CPU_MILLICORES"),
        pids=_positive_int(env, "TRINITY_AGENT_PIDS_LIMIT"),
    )


def _positive_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(f"{name}={raw!r} is not a positive whole number")
    return int(raw)
