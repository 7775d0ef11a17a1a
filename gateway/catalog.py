"""What the gateway serves: its paths per provider, and the models a key may name.

A model is known when it names a family of its provider (``FAMILIES``); ``MODELS`` is
what ``GET /v1/models`` lists of them. A key's ``model_families`` (empty: all) narrow
both. Pure: no Django.
"""

from __future__ import annotations

from typing import Final

ANTHROPIC: Final = "anthropic"
OPENAI: Final = "openai-codex"

# The families each provider's models belong to: a model is in the first family whose
# word its name contains (an Anthropic one must also start with ``claude-``).
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    ANTHROPIC: ("opus", "sonnet", "haiku"),
    OPENAI: ("codex", "gpt-5"),
}
# The models ``/v1/models`` lists (the CLIs' defaults and their neighbours).
MODELS: Final[dict[str, tuple[str, ...]]] = {
    ANTHROPIC: (
        "claude-opus-4-5",
        "claude-sonnet-5-5",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
    ),
    OPENAI: ("gpt-5.5-codex", "gpt-5-codex", "gpt-5.5", "gpt-5", "gpt-5-mini"),
}
# Each path the gateway serves, and the provider whose API it is.
PATHS: Final[dict[str, str]] = {
    "/v1/messages": ANTHROPIC,
    "/v1/messages/count_tokens": ANTHROPIC,
    "/v1/responses": OPENAI,
}
# The paths whose served answers are billed (a token count costs nothing).
BILLED: Final = frozenset({"/v1/messages", "/v1/responses"})


def family_of(provider: str, model: str) -> str | None:
    """The family ``model`` belongs to at ``provider``; None: not a model it serves."""
    name = model.strip().lower()
    if not name:
        return None
    if provider == ANTHROPIC and not name.startswith("claude-"):
        return None
    for family in FAMILIES.get(provider, ()):
        if family in name:
            return family
    return None


def allowed_models(providers: list[str], families: list[str]) -> list[tuple[str, str]]:
    """(provider, model) pairs a key allowing ``providers`` and ``families`` may use
    (an empty list allows all)."""
    return [
        (provider, model)
        for provider, models in MODELS.items()
        if not providers or provider in providers
        for model in models
        if not families or family_of(provider, model) in families
    ]
