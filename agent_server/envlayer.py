"""Per-spawn environment layering. `layer_env` is pure; the `.env` reader is separate.

Layers, lowest to highest:
  1. the server process's own environment at boot (the baseline);
  2. the agent's `.env` file, re-read per spawn: only names on the allowlist
     (``dotenv_allows``); the others are dropped and their names logged;
  3. runtime overrides (reload-token's token, the API-key force-unset), None = unset;
  4. the per-request extra (an `auth_override`), None = unset;
  5. the per-request drop list;
then the fixed flags and the per-spawn HOME, which nothing may override.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from agent_server.contract import AppliedOverride

logger = logging.getLogger(__name__)

# Variable names, not values (hence the S105 waivers).
OAUTH_TOKEN: Final = "CLAUDE_CODE_OAUTH_TOKEN"  # noqa: S105
API_KEY: Final = "ANTHROPIC_API_KEY"
AUTH_TOKEN: Final = "ANTHROPIC_AUTH_TOKEN"  # noqa: S105
AGENT_SECRET: Final = "TRINITY_AGENT_SECRET"  # noqa: S105

# The names that shadow a subscription token: the CLI prefers either over OAuth.
API_KEY_NAMES: Final = (API_KEY, AUTH_TOKEN)

FIXED_ENV: Final[Mapping[str, str]] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
}

# Defaults a spawn's baseline or `.env` may change. The CLI retries a 429 that is no
# usage limit (a throttle) 10 times over minutes by default, inside the turn's budget,
# so the control plane saw a throttle only as a timeout. Two retries ride out a blip
# in seconds; then the CLI reports the 429 ("Server is temporarily limiting requests
# (not your usage limit)") and the turn walks while that plan backs off briefly.
SPAWN_DEFAULTS: Final[Mapping[str, str]] = {"CLAUDE_CODE_MAX_RETRIES": "2"}

# The agent's `.env` is written by whatever runs in the agent, tools included, so it
# is hostile input: an allowlist, not a denylist. A denylist always misses one name
# (`*_BASE_URL`, `*_PROXY`, `NODE_OPTIONS`, `LD_PRELOAD`, `PYTHON*`, `BASH_ENV`,
# `SHELL`, `GIT_SSH_COMMAND`, a CLI knob that picks another endpoint or auth) and one
# such name moves every later spawn, with every override credential, to another host
# or loads other code into it. Allowed: CLI knobs that change how much and how long,
# never where or as whom, and the operator's own variables under the `AGENT_` prefix
# (no runtime or tool reads that namespace). Credentials and `TRINITY_*` are never
# allowed: the platform sets those, by baseline and override only.
DOTENV_ALLOWED_NAMES: Final = frozenset(
    {
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "BASH_MAX_OUTPUT_LENGTH",
        "MCP_TIMEOUT",
        "MCP_TOOL_TIMEOUT",
        "NO_COLOR",
        "FORCE_COLOR",
    }
)
DOTENV_ALLOWED_PREFIXES: Final = ("AGENT_",)

# The child never needs the server's shared secret, and the agent's own tools run in
# that child: giving it the secret would let a prompt drive other agents' servers.
ALWAYS_DROPPED: Final = frozenset({AGENT_SECRET})

_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def dotenv_allows(name: str) -> bool:
    """True when the agent's `.env` may set ``name`` (case-sensitive: `https_proxy`
    is as refused as `HTTPS_PROXY`)."""
    return name in DOTENV_ALLOWED_NAMES or name.startswith(DOTENV_ALLOWED_PREFIXES)


def override_layers(
    override: AppliedOverride | None,
) -> tuple[dict[str, str | None], frozenset[str]]:
    """Return (extra, drop) for one request's auth override.

    An OAuth override drops both API-key names, because either would shadow it. An
    API-key override drops the OAuth token and ANTHROPIC_AUTH_TOKEN as well, so the
    key is the one credential the spawn can send.
    """
    if override is None:
        return {}, frozenset()
    if override.kind == "oauth_token":
        return {OAUTH_TOKEN: override.secret}, frozenset(API_KEY_NAMES)
    return {API_KEY: override.secret}, frozenset({OAUTH_TOKEN, AUTH_TOKEN})


def layer_env(
    *,
    baseline: Mapping[str, str],
    dotenv: Mapping[str, str],
    runtime_overrides: Mapping[str, str | None],
    extra: Mapping[str, str | None],
    drop: Iterable[str],
    home: str,
) -> dict[str, str]:
    """Return the environment for one spawn. Changes nothing it is given.

    The `.env` names off the allowlist are dropped and logged once, names only (a
    value may be a credential or an attacker's URL).
    """
    env = {**SPAWN_DEFAULTS, **baseline}
    refused = sorted(name for name in dotenv if not dotenv_allows(name))
    if refused:
        logger.warning(
            "the agent's .env may not set %s: ignored for this spawn", ", ".join(refused)
        )
    env.update({name: value for name, value in dotenv.items() if dotenv_allows(name)})
    for layer in (runtime_overrides, extra):
        for name, value in layer.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
    for name in (*drop, *ALWAYS_DROPPED):
        env.pop(name, None)
    env.update(FIXED_ENV)
    env["HOME"] = home
    return env


def parse_dotenv(text: str) -> dict[str, str]:
    """Parse KEY=VALUE lines; `#` comments, blank lines and `export ` are allowed.

    Matching single or double quotes around a value are removed; nothing is
    interpolated. Lines that are not assignments are ignored.
    """
    parsed: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.match(line)
        if match is None:
            continue
        name, value = match.group(1), match.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        parsed[name] = value
    return parsed


def read_dotenv(path: Path) -> dict[str, str]:
    """Read the agent's `.env`; a missing or unreadable file is an empty layer."""
    try:
        return parse_dotenv(path.read_text(encoding="utf-8", errors="replace"))
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return {}
