"""Per-provider checks on what an operator pastes as a plan token.

Messages name what the value looks like and where it belongs, never the value.
"""

from __future__ import annotations

from routing.credential_shapes import (
    ANTHROPIC_PLAN_MIN_BODY,
    ANTHROPIC_PLAN_PREFIX,
    OPENAI_KEY_PREFIX,
    PLATFORM_API_KEY_PREFIX,
)
from subscriptions.codex_credential import (
    CodexCredentialError,
    codex_credential_load,
    codex_credential_parse,
)
from subscriptions.models import Provider
from trinity.crypto import fingerprint
from trinity.errors import InvalidInput


def validate_plan_token(*, provider: str, token: str) -> str:
    """Return the stripped token, or raise InvalidInput on field ``token``."""
    token = token.strip()
    if not token:
        raise InvalidInput("A token is required.", field="token")
    if any(c.isspace() for c in token) and provider != Provider.OPENAI_CODEX:
        raise InvalidInput("A token has no spaces or line breaks.", field="token")
    if provider == Provider.ANTHROPIC:
        if token.startswith(PLATFORM_API_KEY_PREFIX):
            raise InvalidInput(
                "This is an Anthropic API key, which bills per token. It belongs in the "
                "platform API key setting (Settings → Platform API key), not in a subscription.",
                field="token",
            )
        if (
            not token.startswith(ANTHROPIC_PLAN_PREFIX)
            or len(token) < len(ANTHROPIC_PLAN_PREFIX) + ANTHROPIC_PLAN_MIN_BODY
        ):
            raise InvalidInput(
                f"A Claude plan token starts with '{ANTHROPIC_PLAN_PREFIX}' "
                "(run `claude setup-token` to get one).",
                field="token",
            )
    elif provider == Provider.OPENAI_CODEX:
        if token.startswith(OPENAI_KEY_PREFIX):
            raise InvalidInput(
                "This is an API key, which bills per token. It belongs in the OpenAI "
                "platform key setting; a ChatGPT/Codex subscription needs the auth.json "
                "`codex login` wrote.",
                field="token",
            )
        try:
            return codex_credential_parse(token).dumps()
        except CodexCredentialError as exc:
            raise InvalidInput(str(exc), field="token") from None
    else:
        raise InvalidInput(f"Unknown provider {provider!r}.", field="provider")
    return token


def plan_token_fingerprint(*, provider: str, token: str) -> str:
    """The fingerprint shown for a validated plan token: its last 4 characters, or for a
    Codex credential its access token's (the stored form is JSON)."""
    if provider == Provider.OPENAI_CODEX:
        return fingerprint(codex_credential_load(token).access_token)
    return fingerprint(token)
