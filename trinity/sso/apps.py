from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings

from trinity_contract.redaction import register_secret


class SsoConfig(AppConfig):
    name = "trinity.sso"
    label = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The client secret goes to the provider's token endpoint on every sign-in: no
        # log line, error or response of this process may carry it, whatever logs it.
        if settings.TRINITY_OIDC_CLIENT_SECRET:
            register_secret(settings.TRINITY_OIDC_CLIENT_SECRET)
