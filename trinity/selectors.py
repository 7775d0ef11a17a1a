from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser

from trinity.models import SystemSettings


def system_settings_get() -> SystemSettings:
    """Return the settings row, creating it with the defaults on first read."""
    row, _ = SystemSettings.objects.get_or_create(pk=SystemSettings.SINGLETON_ID)
    return row


def api_token_is_live(*, key: str, user: AbstractBaseUser) -> bool:
    """True when ``key`` is an unexpired API token of ``user`` (its digest is stored)."""
    from django.utils import timezone
    from knox.crypto import hash_token
    from knox.models import AuthToken

    return (
        AuthToken.objects.filter(digest=hash_token(key), user=user)
        .exclude(expiry__lt=timezone.now())
        .exists()
    )
