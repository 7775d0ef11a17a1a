"""Per-provider checks on what an operator pastes as a plan token.

Messages name what the value looks like and where it belongs, never the value.
"""

from __future__ import annotations

import re

from subscriptions.models import Provider
from trinity.errors import InvalidInput

ANTHROPIC_PLAN_PREFIX = "sk-ant-oat01-"
_JWT = re.compile(r"^[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*$")


def validate_plan_token(*, provider: str, token: str) -> str:
    """Return the stripped token, or raise InvalidInput on field ``token``."""
    token = token.strip()
    if not token:
        raise InvalidInput("A token is required.", field="token")
    if any(c.isspace() for c in token):
        raise InvalidInput("A token has no spaces or line breaks.", field="token")
    if provider == Provider.ANTHROPIC:
        if token.startswith("sk-ant-api"):
            raise InvalidInput(
                "This is an Anthropic API key, which bills per token. It belongs in the "
                "platform API key setting (Settings → Platform API key), not in a subscription.",
                field="token",
            )
        if (
            not token.startswith(ANTHROPIC_PLAN_PREFIX)
            or len(token) < len(ANTHROPIC_PLAN_PREFIX) + 16
        ):
            raise InvalidInput(
                f"A Claude plan token starts with '{ANTHROPIC_PLAN_PREFIX}' "
                "(run `claude setup-token` to get one).",
                field="token",
            )
    elif provider == Provider.OPENAI_CODEX:
        if token.startswith("sk-"):
            raise InvalidInput(
                "This is an API key, which bills per token. A ChatGPT/Codex subscription "
                "needs the plan's access token (a JWT from `codex login`).",
                field="token",
            )
        if not _JWT.match(token) or not token.startswith("eyJ"):
            raise InvalidInput(
                "A ChatGPT/Codex plan token is a JWT access token (three dot-separated parts "
                "starting with 'eyJ').",
                field="token",
            )
    else:
        raise InvalidInput(f"Unknown provider {provider!r}.", field="provider")
    return token
