from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from knox.models import AuthToken

from routing import providers
from routing.credential_shapes import (
    ANTHROPIC_OAUTH_PREFIX,
    ANTHROPIC_PREFIX,
    JWT_PREFIX,
    OPENAI_KEY_PREFIX,
    PLATFORM_API_KEY_PREFIX,
    PLATFORM_KEY_MIN_LENGTH,
)
from trinity.crypto import Secret, fingerprint
from trinity.errors import InvalidInput, NotFound
from trinity.models import SystemSettings, validate_alert_threshold
from trinity.selectors import system_settings_get

SWITCHES = (
    "auto_switch_subscriptions",
    "subscription_api_key_fallback",
    "subscription_headroom_auto_refresh",
)


@transaction.atomic
def system_setting_set(*, name: str, value: bool | int) -> SystemSettings:
    """Set one switch or the alert threshold; raises InvalidInput on a bad value."""
    row = system_settings_get()
    if name in SWITCHES:
        if not isinstance(value, bool):
            raise InvalidInput("Must be true or false.", field="enabled")
    elif name == "headroom_alert_threshold":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput("Must be an integer.", field="threshold")
        try:
            validate_alert_threshold(value)
        except DjangoValidationError as exc:
            # Only the validator's own verdict is bad input; any other exception is a
            # bug and must surface as one, not as a 400 carrying the bug's text.
            raise InvalidInput(" ".join(exc.messages), field="threshold") from None
    else:
        raise InvalidInput(f"Unknown setting {name!r}.")
    SystemSettings.objects.filter(pk=row.pk).update(**{name: value})
    row.refresh_from_db()
    return row


def validate_platform_api_key(key: str) -> str:
    """Return the stripped Anthropic key or raise InvalidInput (never echoing the value)."""
    key = key.strip()
    if key.startswith(ANTHROPIC_OAUTH_PREFIX):
        raise InvalidInput(
            "This is a Claude plan OAuth token; register it as a subscription instead.",
            field="key",
        )
    if key.startswith(OPENAI_KEY_PREFIX) and not key.startswith(ANTHROPIC_PREFIX):
        raise InvalidInput(
            "This is an OpenAI API key; set it as the OpenAI platform key "
            "(Settings → OpenAI platform key) instead.",
            field="key",
        )
    if (
        not key.startswith(PLATFORM_API_KEY_PREFIX)
        or len(key) < PLATFORM_KEY_MIN_LENGTH
        or any(c.isspace() for c in key)
    ):
        raise InvalidInput(
            f"An Anthropic platform API key starts with '{PLATFORM_API_KEY_PREFIX}'.", field="key"
        )
    return key


def validate_openai_platform_key(key: str) -> str:
    """Return the stripped OpenAI key (``sk-proj-…``, ``sk-svcacct-…``, ``sk-…``, never
    ``sk-ant-…``) or raise InvalidInput naming where the value belongs instead (never
    echoing it)."""
    key = key.strip()
    if key.startswith(ANTHROPIC_OAUTH_PREFIX):
        raise InvalidInput(
            "This is a Claude plan OAuth token; register it as a subscription instead.",
            field="key",
        )
    if key.startswith(ANTHROPIC_PREFIX):
        raise InvalidInput(
            "This is an Anthropic API key; set it as the Anthropic platform API key "
            "(Settings → Platform API key) instead.",
            field="key",
        )
    if key.startswith(JWT_PREFIX):
        raise InvalidInput(
            "This is a ChatGPT/Codex plan token; register it as a subscription instead.",
            field="key",
        )
    if (
        not key.startswith(OPENAI_KEY_PREFIX)
        or len(key) < PLATFORM_KEY_MIN_LENGTH
        or any(c.isspace() for c in key)
    ):
        raise InvalidInput(
            f"An OpenAI platform key starts with '{OPENAI_KEY_PREFIX}' "
            "(e.g. 'sk-proj-' or 'sk-svcacct-').",
            field="key",
        )
    return key


_VALIDATORS = {
    providers.ANTHROPIC: validate_platform_api_key,
    providers.OPENAI: validate_openai_platform_key,
}


def _slot(provider: str) -> providers.KeySlot:
    slot = providers.key_slot(provider)
    if slot is None:
        raise InvalidInput(f"No platform key is kept for provider {provider!r}.", field="provider")
    return slot


@transaction.atomic
def platform_api_key_set(*, key: str, provider: str = providers.ANTHROPIC) -> SystemSettings:
    """Set (or replace) ``provider``'s platform key, validated for that provider.

    Raises InvalidInput for a value that is not that provider's key (the message says
    where it belongs) or a provider without a key; writes nothing then.
    """
    slot = _slot(provider)
    key = _VALIDATORS[provider](key)
    row = system_settings_get()
    setattr(row, slot.secret_field, Secret(key))
    setattr(row, slot.fingerprint_field, fingerprint(key))
    row.save(update_fields=[slot.secret_field, slot.fingerprint_field, "updated_at"])
    return row


@transaction.atomic
def platform_api_key_clear(*, provider: str = providers.ANTHROPIC) -> SystemSettings:
    """Remove ``provider``'s platform key (the other provider's stays)."""
    slot = _slot(provider)
    row = system_settings_get()
    setattr(row, slot.secret_field, None)
    setattr(row, slot.fingerprint_field, "")
    row.save(update_fields=[slot.secret_field, slot.fingerprint_field, "updated_at"])
    return row


@dataclass(frozen=True)
class IssuedToken:
    """A token just issued: its row (a digest, never the key) and the key, which exists
    only here; show it once and never log it."""

    token: AuthToken
    key: str = field(repr=False)


@transaction.atomic
def api_token_issue(
    *, username: str, rotate: bool = False, expires_in: timedelta | None = None
) -> IssuedToken:
    """Issue a new API token for ``username``; ``rotate`` first revokes every token the
    user has (they stop working at once).

    The database keeps the key's digest only (django-rest-knox), so an issued key cannot
    be shown again: a caller that lost it issues another. It expires after
    ``expires_in``, or after ``REST_KNOX["TOKEN_TTL"]`` (``TRINITY_API_TOKEN_TTL_DAYS``;
    none: until revoked) when that is None. Raises NotFound for an unknown user and
    InvalidInput for an inactive one (token authentication refuses inactive users).
    """
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"No user {username!r}.")
    if not user.is_active:
        raise InvalidInput(f"User {username!r} is inactive.", field="username")
    if rotate:
        AuthToken.objects.filter(user=user).delete()
    ttl = expires_in if expires_in is not None else settings.REST_KNOX["TOKEN_TTL"]
    token, key = AuthToken.objects.create(user=user, expiry=ttl)
    return IssuedToken(token=token, key=key)


# The routing settings an admin may change together (``PUT .../settings/routing``).
ROUTING_SETTINGS = (
    "default_routing_policy",
    "routing_strategy",
    "key_budget_daily_usd",
    "key_budget_monthly_usd",
    "openai_key_budget_daily_usd",
    "openai_key_budget_monthly_usd",
)


@transaction.atomic
def system_routing_settings_set(*, changes: dict[str, object]) -> SystemSettings:
    """Set any of ``ROUTING_SETTINGS`` at once (validated by the caller's serializer:
    a policy and a strategy among their choices, budgets >= 0 or None for no cap).

    Raises InvalidInput for a name that is not a routing setting. Returns the row.
    """
    unknown = sorted(set(changes) - set(ROUTING_SETTINGS))
    if unknown:
        raise InvalidInput(f"Unknown setting {unknown[0]!r}.")
    row = system_settings_get()
    if changes:
        SystemSettings.objects.filter(pk=row.pk).update(**changes)
        row.refresh_from_db()
    return row
