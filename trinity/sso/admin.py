from __future__ import annotations

from django.contrib import admin

from trinity.sso.models import SsoIdentity


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin[SsoIdentity]):
    """Which account a provider's subject signs in to. Adding one links an existing
    account to a person at the provider (sign-in never links by name on its own)."""

    list_display = ["user", "subject", "issuer", "last_sign_in_at"]
    search_fields = ["user__username", "subject"]
    raw_id_fields = ["user"]
