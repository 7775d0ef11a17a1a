"""Per-spawn environment layering. `layer_env` is pure; the `.env` reader is separate.

Layers, lowest to highest:
  1. the server process's own environment at boot (the baseline);
  2. the agent's `.env` file, re-read per spawn (protected names skipped);
  3. runtime overrides (reload-token's token, the API-key force-unset), None = unset;
  4. the per-request extra (an `auth_override`), None = unset;
  5. the per-request drop list;
then the fixed flags and the per-spawn HOME, which nothing may override.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from agent_server.contract import AppliedOverride

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

# A `.env` may not move the binary search path, the per-spawn HOME, or anything the
# server itself is configured by.
PROTECTED_NAMES: Final = frozenset({"PATH", "HOME", AGENT_SECRET})
PROTECTED_PREFIX: Final = "TRINITY_"

# The child never needs the server's shared secret, and the agent's own tools run in
# that child: giving it the secret would let a prompt drive other agents' servers.
ALWAYS_DROPPED: Final = frozenset({AGENT_SECRET})

_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def is_protected(name: str) -> bool:
    return name in PROTECTED_NAMES or name.startswith(PROTECTED_PREFIX)


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
    """Return the environment for one spawn. Changes nothing it is given."""
    env = {**SPAWN_DEFAULTS, **baseline}
    env.update({name: value for name, value in dotenv.items() if not is_protected(name)})
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
