from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from trinity import api, health, metrics, notification_channels_api, panel
from trinity.sso import views as sso_views

# A request Django refuses before DRF sees it (e.g. an oversized body read by a plain
# view) answers JSON under /api/ (trinity/api.py::bad_request).
handler400 = "trinity.api.bad_request"
handler404 = "trinity.api.not_found"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("subscriptions.urls")),
    path("api/", include("execution.urls")),
    path("api/", include("agents.urls")),
    # People's own CLIs through the pool: their gateway keys, usage and open requests.
    path("api/", include("gateway.urls")),
    # The audit log (admins only, read-only): GET /api/audit and /api/audit/export.
    path("api/", include("trinity.audit.urls")),
    # The settings panel: session sign-in for the built Vue app, and the app itself.
    path("api/auth/csrf", panel.auth_csrf, name="auth-csrf"),
    path("api/auth/login", panel.auth_login, name="auth-login"),
    path("api/auth/logout", panel.auth_logout, name="auth-logout"),
    path("api/auth/me", panel.auth_me, name="auth-me"),
    # Single sign-on: how one may sign in, and the provider's sign-in (trinity/sso).
    path("api/auth/options", sso_views.auth_options, name="auth-options"),
    path("oidc/", include("trinity.sso.urls")),
    # API tokens for scripts and operators (admins only); `manage.py api_token` too.
    path("api/auth/tokens", api.ApiTokenApi.as_view(), name="auth-tokens"),
    # Where notifications are also sent (admins only): webhooks, with delivery records.
    path(
        "api/notification-channels",
        notification_channels_api.ChannelListApi.as_view(),
        name="notification-channel-list",
    ),
    path(
        "api/notification-channels/<int:pk>",
        notification_channels_api.ChannelDetailApi.as_view(),
        name="notification-channel-detail",
    ),
    path(
        "api/notification-channels/<int:pk>/test",
        notification_channels_api.ChannelTestApi.as_view(),
        name="notification-channel-test",
    ),
    path(
        "api/notification-channels/<int:pk>/deliveries",
        notification_channels_api.ChannelDeliveriesApi.as_view(),
        name="notification-channel-deliveries",
    ),
    # Off the API, for load balancers and orchestrators (trinity/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Prometheus; only from TRINITY_METRICS_ALLOW_FROM, with TRINITY_METRICS_TOKEN if set.
    path("metrics", metrics.metrics_view, name="metrics"),
    path("", panel.index, name="panel"),
]
