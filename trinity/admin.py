from __future__ import annotations

import math
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from knox.admin import AuthTokenAdmin
from knox.models import AuthToken

from trinity.authentication import (
    password_sign_in_failed,
    password_sign_in_refusal,
    password_sign_in_succeeded,
)
from trinity.models import Notification, SystemSettings
from trinity.sso.config import local_password_allowed, password_refusal_message


class ThrottledAdminAuthenticationForm(AdminAuthenticationForm):
    """Admin's login under the panel's throttle: the same counts, limit and window
    (``trinity.authentication.password_sign_in_refusal``), so a guess cannot move to
    ``/admin/login/`` when the panel refuses it. Over the limit the password is not
    checked and the form says when to try again. While local passwords are off, only
    the break-glass users' passwords are checked (``trinity.sso.config``)."""

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if not username or not password:
            return super().clean()
        if not local_password_allowed(username):
            # Unchecked, like the panel: only the break-glass users use passwords now.
            raise ValidationError(password_refusal_message(), code="sso_required")
        wait = password_sign_in_refusal(request=self.request, username=username)
        if wait is not None:
            raise ValidationError(
                "Too many failed sign-ins. Try again in %(seconds)s seconds.",
                code="throttled",
                params={"seconds": math.ceil(wait)},
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            if self.user_cache is None:  # a wrong password, not a signed-in non-staff user
                password_sign_in_failed(request=self.request, username=username)
            raise
        password_sign_in_succeeded(request=self.request, username=username)
        return cleaned


admin.site.login_form = ThrottledAdminAuthenticationForm
# Admin's login page offers the provider's sign-in too, when single sign-on is on.
admin.site.login_template = "sso/admin_login.html"


# knox's own admin lists each token's digest; this one lists whose token it is and
# its first 8 characters (enough to tell two apart, far too few to use), never a key.
admin.site.unregister(AuthToken)


@admin.register(AuthToken)
class ApiTokenAdmin(AuthTokenAdmin):
    list_display = ("user", "key_start", "created", "expiry")
    list_filter = ("expiry",)
    search_fields = ["user__username"]
    ordering = ("-created",)

    @admin.display(description="key starts with")
    def key_start(self, obj: AuthToken) -> str:
        return f"{obj.token_key[:8]}…"

    def has_change_permission(self, request: HttpRequest, obj: AuthToken | None = None) -> bool:
        return False  # a token is issued or deleted, never edited

    def save_model(self, request: HttpRequest, obj: AuthToken, form: Any, change: bool) -> None:
        # Not knox's save_model: its message ("TOKEN <key>") does not say it is the only
        # time the key is shown.
        admin.ModelAdmin.save_model(self, request, obj, form, change)
        self.message_user(
            request,
            f"API token for {obj.user}, shown only now: {form.token}",
            messages.WARNING,
        )


@admin.register(SystemSettings)
class SystemSettingsAdmin(admin.ModelAdmin[SystemSettings]):
    # The platform keys are write-only: set them through the API or the panel.
    fields = [
        "auto_switch_subscriptions",
        "subscription_api_key_fallback",
        "subscription_headroom_auto_refresh",
        "headroom_alert_threshold",
        "platform_api_key_fingerprint",
        "openai_platform_api_key_fingerprint",
        "updated_at",
    ]
    readonly_fields = [
        "platform_api_key_fingerprint",
        "openai_platform_api_key_fingerprint",
        "updated_at",
    ]
    list_display = ["__str__", "auto_switch_subscriptions", "subscription_api_key_fallback"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not SystemSettings.objects.exists()

    def has_delete_permission(
        self, request: HttpRequest, obj: SystemSettings | None = None
    ) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin[Notification]):
    list_display = ["created_at", "level", "kind", "title", "agent_name"]
    list_filter = ["level", "kind"]
    search_fields = ["title", "agent_name"]
    readonly_fields = [f.name for f in Notification._meta.fields]
