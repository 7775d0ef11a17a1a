"""Which credential a spawn spends, and the CLI environment that holds only a capability.

Two provider families, one shape (`CredentialScheme`):

- **Anthropic** (the Claude Code CLI): `ANTHROPIC_API_KEY`, then `ANTHROPIC_AUTH_TOKEN`,
  then `CLAUDE_CODE_OAUTH_TOKEN`: the CLI's own preference, so the `.env` shadow and
  the boot guard behave as they would without the forwarder. The capability goes
  under the name that carried the credential, `ANTHROPIC_BASE_URL` to the forwarder.
- **Codex** (the Codex CLI): a plan's access token `CODEX_ACCESS_TOKEN` (with its
  ChatGPT account, `CODEX_ACCOUNT_ID`, else the token's own claim), then an OpenAI key
  `OPENAI_API_KEY`. The server, not the CLI, chooses here: the CLI always runs in
  API-key mode against the forwarder, with the capability as `OPENAI_API_KEY`, so it
  never holds a plan token, an auth.json or a refresh token; the plan is preferred
  because its quota is already paid for (a key-only spawn spends the key).

Every credential variable of both families is removed from every CLI environment: a
CLI has no use for the other family's secret, and its tools could read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from agent_server.contract import AppliedOverride
from agent_server.envlayer import API_KEY, API_KEY_NAMES, AUTH_TOKEN, OAUTH_TOKEN, override_layers
from agent_server.forwarder import HeaderShape
from trinity_contract.codex import claimed_account

# Variable names, not values (hence the S105 waivers).
CODEX_ACCESS_TOKEN: Final = "CODEX_ACCESS_TOKEN"  # noqa: S105
CODEX_ACCOUNT_ID: Final = "CODEX_ACCOUNT_ID"
OPENAI_API_KEY: Final = "OPENAI_API_KEY"
# Where the Codex runtime finds the forwarder (its config.toml's provider base URL).
CODEX_FORWARDER_URL: Final = "OPENAI_BASE_URL"

# The variables the Claude CLI reads its credential from, in the order it prefers
# them (an API key shadows an OAuth token), with the header shape each one sends.
CLI_CREDENTIALS: tuple[tuple[str, HeaderShape], ...] = (
    (API_KEY, "x-api-key"),
    (AUTH_TOKEN, "bearer"),
    (OAUTH_TOKEN, "bearer"),
)
# `CODEX_API_KEY` is no input of the server's, but the Codex CLI would spend it in
# place of its provider key (and read `CODEX_ACCESS_TOKEN` as an agent identity): a
# baseline carrying either must not reach it.
ALL_CREDENTIAL_NAMES: Final = frozenset(
    {
        API_KEY,
        AUTH_TOKEN,
        OAUTH_TOKEN,
        CODEX_ACCESS_TOKEN,
        CODEX_ACCOUNT_ID,
        OPENAI_API_KEY,
        "CODEX_API_KEY",
    }
)

Layers = tuple[dict[str, str | None], frozenset[str]]


@dataclass(frozen=True)
class TurnCredential:
    """The credential one spawn would send, and the variable its CLI reads it from."""

    env_name: str
    shape: HeaderShape
    secret: str
    account_id: str | None = None

    def __repr__(self) -> str:
        return f"TurnCredential(env_name={self.env_name!r}, shape={self.shape!r})"


@dataclass(frozen=True)
class CredentialScheme:
    """Where one provider family's credentials live in a spawn's environment.

    `plan_name` is what reload-token and an `oauth_token` override set (and
    `reload_unsets` what a reload clears beside it); `key_names` are the keys
    `remove_api_key` force-unsets and `env_shadow` reports.
    """

    plan_name: str
    key_names: tuple[str, ...]
    reload_unsets: tuple[str, ...]
    override_layers: Callable[[AppliedOverride | None], Layers]
    turn_credential: Callable[[Mapping[str, str]], TurnCredential | None]
    capability_env: Callable[[Mapping[str, str], str | None, str | None, str], dict[str, str]]


def turn_credential(env: Mapping[str, str]) -> TurnCredential | None:
    """What the Claude CLI would authenticate with in `env` (None: nothing)."""
    for name, shape in CLI_CREDENTIALS:
        value = env.get(name, "")
        if value:
            return TurnCredential(env_name=name, shape=shape, secret=value)
    return None


def capability_env(
    env: Mapping[str, str], capability: str | None, name: str | None, forwarder_url: str
) -> dict[str, str]:
    """`env` with every provider credential removed, the capability (if any) under
    `name`, and the forwarder as the Claude CLI's base URL. Changes nothing it is given."""
    cli = {k: v for k, v in env.items() if k not in ALL_CREDENTIAL_NAMES}
    if capability is not None and name is not None:
        cli[name] = capability
    # Last, so neither the baseline nor the agent's `.env` can point the CLI elsewhere.
    cli["ANTHROPIC_BASE_URL"] = forwarder_url
    return cli


def codex_override_layers(override: AppliedOverride | None) -> Layers:
    """(extra, drop) for a Codex spawn's override: an `oauth_token` is a plan's access
    token with the account the platform named (else read from the token: the
    baseline's account id belongs to the baseline's plan), an `api_key` an OpenAI key;
    each drops the other."""
    if override is None:
        return {}, frozenset()
    if override.kind == "oauth_token":
        plan = {CODEX_ACCESS_TOKEN: override.secret, CODEX_ACCOUNT_ID: override.account_id}
        return plan, frozenset({OPENAI_API_KEY})
    return {OPENAI_API_KEY: override.secret}, frozenset({CODEX_ACCESS_TOKEN, CODEX_ACCOUNT_ID})


def codex_turn_credential(env: Mapping[str, str]) -> TurnCredential | None:
    """The plan's access token (with its account), else the OpenAI key, else None."""
    token = env.get(CODEX_ACCESS_TOKEN, "")
    if token:
        account = env.get(CODEX_ACCOUNT_ID, "").strip() or token_account_id(token)
        return TurnCredential(
            env_name=OPENAI_API_KEY, shape="codex-plan", secret=token, account_id=account
        )
    key = env.get(OPENAI_API_KEY, "")
    if key:
        return TurnCredential(env_name=OPENAI_API_KEY, shape="openai-key", secret=key)
    return None


def codex_capability_env(
    env: Mapping[str, str], capability: str | None, name: str | None, forwarder_url: str
) -> dict[str, str]:
    """`env` with every credential removed, the capability as `OPENAI_API_KEY` and the
    forwarder's `/v1` as the provider URL the runtime writes into config.toml."""
    cli = {k: v for k, v in env.items() if k not in ALL_CREDENTIAL_NAMES}
    if capability is not None:
        cli[name or OPENAI_API_KEY] = capability
    cli[CODEX_FORWARDER_URL] = forwarder_url + "/v1"
    return cli


def token_account_id(token: str) -> str | None:
    """The ChatGPT account a plan's access token names (its JWT claim), else None."""
    return claimed_account(token) or None


ANTHROPIC: Final = CredentialScheme(
    plan_name=OAUTH_TOKEN,
    key_names=API_KEY_NAMES,
    reload_unsets=(),
    override_layers=override_layers,
    turn_credential=turn_credential,
    capability_env=capability_env,
)
CODEX: Final = CredentialScheme(
    plan_name=CODEX_ACCESS_TOKEN,
    key_names=(OPENAI_API_KEY,),
    reload_unsets=(CODEX_ACCOUNT_ID,),
    override_layers=codex_override_layers,
    turn_credential=codex_turn_credential,
    capability_env=codex_capability_env,
)


def scheme_for(runtime: str) -> CredentialScheme:
    return CODEX if runtime == "codex-cli" else ANTHROPIC
